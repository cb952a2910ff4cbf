// A real OpenID Connect provider for flowgate-http's OIDC sign-in tests (D28): panva's
// oidc-provider (a certified OpenID Provider implementation) with two confidential clients,
// PKCE required, and its development login and consent forms, so a test signs in by posting
// two forms over plain HTTP, without a browser.
//
//   node provider.js [PORT]      (or PORT=... node provider.js; 0 or nothing: a free port)
//
// With TLS_CERT_FILE and TLS_KEY_FILE (PEM) it serves https with that certificate instead of
// plain http, so a test can sign in through a provider on a private certificate authority.
//
// Once listening it prints one JSON line to stdout, {"issuer": "...", "port": N}, which the
// test reads. It exits when its standard input closes, so a test process that dies (even
// killed) takes its provider with it instead of leaving it listening.
//
// Clients, both redirecting to http://127.0.0.1:9999/console/oidc/callback (nothing listens
// there: the test reads the code from the redirect's Location) and to the REDIRECT_URIS:
//   client-a / secret-a  ID tokens signed RS256 (kid "rsa-1")
//   client-b / secret-b  ID tokens signed ES256 (kid "ec-1")
// Accounts: any login and password are accepted (the development forms); the login is the
// account's id, its email `<login>@flowgate.test` (verified), its groups
// ["flowgate-editors", "staff"]; a login beginning with `outsider` has the email
// `<login>@elsewhere.test` and no groups. Scope `groups` asks for the groups claim.
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';

import Provider from 'oidc-provider';

const requested = Number.parseInt(process.argv[2] ?? process.env.PORT ?? '0', 10);
if (!Number.isInteger(requested) || requested < 0 || requested > 65535) {
  console.error(`provider.js: not a port: ${process.argv[2] ?? process.env.PORT}`);
  process.exit(2);
}

// The provider's signing keys, fixed test keys (public by being in this repository; they sign
// nothing but these tests' ID tokens). Not generated at start: Node 20's generateKeyPairSync
// deadlocks now and then when the garbage collector frees the key generation job while the
// key is being exported (once in about fifty starts here, eight at a time), and the tests
// read the keys from the JWKS like any relying party anyway.
const jwks = JSON.parse(readFileSync(new URL('./test-keys.json', import.meta.url), 'utf8'));

// REDIRECT_URIS (comma-separated) adds the callbacks of consoles a test starts.
const REDIRECT_URIS = [
  'http://127.0.0.1:9999/console/oidc/callback',
  ...(process.env.REDIRECT_URIS ?? '').split(',').filter(Boolean),
];

const { TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile } = process.env;
const tls = Boolean(certFile && keyFile);
const server = tls
  ? https.createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) })
  : http.createServer();
server.listen(requested, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'client-a',
        client_secret: 'secret-a',
        redirect_uris: REDIRECT_URIS,
        response_types: ['code'],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_basic',
        id_token_signed_response_alg: 'RS256',
      },
      {
        client_id: 'client-b',
        client_secret: 'secret-b',
        redirect_uris: REDIRECT_URIS,
        response_types: ['code'],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_basic',
        id_token_signed_response_alg: 'ES256',
      },
    ],
    jwks,
    // Every client must send a PKCE challenge (S256 is the only method oidc-provider takes).
    pkce: { required: () => true },
    scopes: ['openid', 'email', 'profile', 'groups'],
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name'],
      groups: ['groups'],
    },
    // The claims the scopes grant go into the ID token itself, not only the userinfo
    // endpoint: the relying party reads the ID token alone.
    conformIdTokenClaims: false,
    cookies: { keys: ['flowgate-oidc-test-provider-cookie-key'] },
    features: { devInteractions: { enabled: true } },
    async findAccount(_ctx, id) {
      return {
        accountId: id,
        async claims() {
          const outsider = id.startsWith('outsider');
          return {
            sub: id,
            email: `${id}@${outsider ? 'elsewhere.test' : 'flowgate.test'}`,
            email_verified: true,
            name: id,
            groups: outsider ? [] : ['flowgate-editors', 'staff'],
          };
        },
      };
    },
  });
  // Development-only warnings (devInteractions, in-memory adapter) would drown the test's
  // output; errors still reach stderr through the error events below.
  provider.on('server_error', (_ctx, err) => console.error('server_error', err));
  server.on('request', provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);
});

process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));
