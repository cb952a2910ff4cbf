// OpenFeature's own OFREP providers against a running flowgate (D32), for
// crates/flowgate-http/tests/it/ofrep_providers.rs.
//
// Reads one JSON document on standard input:
//   {"baseUrl": "http://127.0.0.1:PORT", "appId": "...", "sdkKey": "...", "flags": ["paywall", ...],
//    "users": [{"targetingKey": "...", "session_id": "...", "device_platform": "ios", "country": "US"}, ...]}
// and prints one on standard output:
//   {"server": [result...], "web": {...}, "webCrossOrigin": {...}, "ms": {phase: milliseconds}}
// where a result is {"flag", "user", "value", "reason", "variant", "errorCode"} as the provider
// answered it through the OpenFeature client (getObjectDetails).
//
// - server: @openfeature/ofrep-provider with @openfeature/server-sdk in this Node process; the
//   provider posts one flag evaluation per call.
// - web: @openfeature/ofrep-web-provider with @openfeature/web-sdk in headless Chromium
//   (/usr/bin/chromium, driven by playwright-core), the SDK bundled by esbuild in memory. The
//   provider bulk-evaluates on init and on each context change and answers from its cache;
//   each user's context is set twice, the second time asking with the ETag of the first
//   answer (If-None-Match), which flowgate answers 304. Run twice: `web`, the page served at
//   flowgate's own origin (by Playwright, under /__ofrep-clients/), and `webCrossOrigin`, the
//   page served from another origin (a server of this script on another port), as a web app
//   calling flowgate is, through CORS (D11).
//   Each has {"results": [...], "errors": [...], "requests": [{"status", "ifNoneMatch"}...]},
//   `requests` being the bulk evaluations the page made.
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';

import { OpenFeature } from '@openfeature/server-sdk';
import { OFREPProvider } from '@openfeature/ofrep-provider';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function result(flag, user, details) {
  return {
    flag,
    user: user.targetingKey,
    value: details.value ?? null,
    reason: details.reason ?? null,
    variant: details.variant ?? null,
    errorCode: details.errorCode ?? null,
    errorMessage: details.errorMessage ?? null,
  };
}

async function serverProvider({ baseUrl, appId, sdkKey, flags, users }) {
  const provider = new OFREPProvider({
    baseUrl: `${baseUrl}/v1/apps/${appId}`,
    headers: { Authorization: `Bearer ${sdkKey}` },
  });
  await OpenFeature.setProviderAndWait(provider);
  const client = OpenFeature.getClient();
  const results = [];
  for (const user of users) {
    for (const flag of flags) {
      const details = await client.getObjectDetails(flag, {}, { ...user });
      results.push(result(flag, user, details));
    }
  }
  await OpenFeature.close();
  return results;
}

/** The page and its script (OpenFeature's web SDK and provider bundled in one). */
async function pageFiles() {
  const bundled = await build({
    entryPoints: [fileURLToPath(new URL('./web-entry.mjs', import.meta.url))],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'chrome120',
    write: false,
    logLevel: 'error',
  });
  const script = bundled.outputFiles[0].contents;
  const html = '<!doctype html><html><head><link rel="icon" href="data:,"><script src="web.js"></script></head><body></body></html>';
  return {
    'index.html': { contentType: 'text/html', body: Buffer.from(html) },
    'web.js': { contentType: 'text/javascript', body: Buffer.from(script) },
  };
}

/** A server of `files` on a port of its own of 127.0.0.1 (another origin than flowgate's). */
async function pageServer(files) {
  const server = createServer((req, res) => {
    const file = files[req.url === '/' ? 'index.html' : req.url.slice(1)];
    if (file) {
      res.writeHead(200, { 'content-type': file.contentType }).end(file.body);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

async function webProvider(browser, files, crossOrigin, { baseUrl, appId, sdkKey, flags, users }) {
  const server = crossOrigin ? await pageServer(files) : null;
  const page = await browser.newPage();
  try {
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    const webRequests = [];
    page.on('requestfinished', async (request) => {
      if (request.method() !== 'POST' || !request.url().endsWith('/ofrep/v1/evaluate/flags')) return;
      const response = await request.response();
      webRequests.push({
        status: response ? response.status() : null,
        ifNoneMatch: (await request.allHeaders())['if-none-match'] ?? null,
      });
    });
    page.on('requestfailed', (request) => {
      problems.push(`request failed: ${request.method()} ${request.url()}: ${request.failure()?.errorText}`);
    });
    if (crossOrigin) {
      await page.goto(`http://127.0.0.1:${server.address().port}/`);
    } else {
      // Only the page's own files are answered by Playwright; the provider's requests go to
      // flowgate.
      await page.route(`${baseUrl}/__ofrep-clients/*`, (route) => {
        const file = files[new URL(route.request().url()).pathname.split('/').pop() || 'index.html'];
        return file
          ? route.fulfill({ status: 200, contentType: file.contentType, body: file.body })
          : route.fulfill({ status: 404 });
      });
      await page.goto(`${baseUrl}/__ofrep-clients/`);
    }
    const results = await page.evaluate(
      async ({ baseUrl, appId, sdkKey, flags, users }) => {
        const { OpenFeature, OFREPWebProvider } = globalThis.ofrep;
        const errors = [];
        const provider = new OFREPWebProvider({
          baseUrl: `${baseUrl}/v1/apps/${appId}`,
          // A list of pairs: ofrep-core 2.3's buildHeaders spreads `headers` as one (a map
          // throws, though the README shows one).
          headers: [['Authorization', `Bearer ${sdkKey}`]],
          // Every answer from the network: no localStorage between users (reason CACHED).
          cacheMode: 'disabled',
          disableVisibilityRefresh: true,
        });
        OpenFeature.addHandler('PROVIDER_ERROR', (e) => errors.push(e.message));
        const client = OpenFeature.getClient();
        const results = [];
        const evaluate = (user, pass) => {
          for (const flag of flags) {
            const d = client.getObjectDetails(flag, {});
            results.push({
              pass,
              flag,
              user: user.targetingKey,
              value: d.value ?? null,
              reason: d.reason ?? null,
              variant: d.variant ?? null,
              errorCode: d.errorCode ?? null,
              errorMessage: d.errorMessage ?? null,
            });
          }
        };
        for (const [i, user] of users.entries()) {
          if (i === 0) {
            await OpenFeature.setProviderAndWait(provider, { ...user });
          } else {
            await OpenFeature.setContext({ ...user });
          }
          evaluate(user, 1);
          // The same context again: the provider asks with the ETag it holds.
          await OpenFeature.setContext({ ...user });
          evaluate(user, 2);
        }
        await OpenFeature.close();
        return { results, errors };
      },
      { baseUrl, appId, sdkKey, flags, users },
    );
    // Let the last requestfinished handlers run.
    await new Promise((resolve) => setTimeout(resolve, 100));
    return { results: results.results, errors: [...results.errors, ...problems], requests: webRequests };
  } finally {
    await page.close();
    server?.close();
  }
}

const input = await readStdin();
const ms = {};
const timed = async (name, run) => {
  const started = performance.now();
  const answer = await run();
  ms[name] = Math.round(performance.now() - started);
  return answer;
};
const server = await timed('server', () => serverProvider(input));
const files = await timed('bundle', () => pageFiles());
const browser = await timed('chromium', () => chromium.launch({ executablePath: CHROMIUM, headless: true }));
let web, webCrossOrigin;
try {
  web = await timed('web', () => webProvider(browser, files, false, input));
  webCrossOrigin = await timed('webCrossOrigin', () => webProvider(browser, files, true, input));
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify({ server, web, webCrossOrigin, ms }) + '\n');
