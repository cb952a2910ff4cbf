// The page's code: OpenFeature's web SDK and its OFREP web provider, bundled by evaluate.mjs
// (esbuild, in memory) into one script the page loads from evaluate.mjs's own server.
import { OpenFeature } from '@openfeature/web-sdk';
import { OFREPWebProvider } from '@openfeature/ofrep-web-provider';

globalThis.ofrep = { OpenFeature, OFREPWebProvider };
