// The Pi package's entry (package.json "pi.extensions"): the extension lives in extension-shim/.
// At the package root so that Pi lists it under the package's own name, pi-memory-bridge.
export { default } from "./extension-shim/src/index.ts";
