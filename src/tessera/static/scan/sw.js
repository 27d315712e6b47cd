// The door scanner's service worker: it keeps /scan and everything the page loads in the Cache
// API, so that the page opens with no network at all. Served by the server at /scan/sw.js with
// `Service-Worker-Allowed: /scan`, its scope is /scan.
//
//   /scan          network first (a new version of the page when the server can be reached),
//                  the cached copy when it cannot
//   ASSETS         cache first: they change only with the server's version, and then so does
//                  this script (VERSION below), which makes the browser install it afresh
//   anything else  (the /v1 API above all) not touched: answers are never cached

const VERSION = "__VERSION__"; // the server writes a digest of the page and its assets here
const CACHE = `tessera-scan-${VERSION}`;
const PAGE = "/scan";
const ASSETS = [
  "/static/tessera.css",
  "/static/favicon.svg",
  "/static/scan/scan.css",
  "/static/scan/scan.js",
  "/static/scan/secret.js",
  "/static/scan/store.js",
  "/static/scan/manifest.json",
  "/static/scan/vendor/ed25519.js",
];

self.addEventListener("install", (event) => {
  event.waitUntil(
    (async () => {
      const cache = await caches.open(CACHE);
      // `reload`: from the server, never a stale copy of the browser's HTTP cache.
      await cache.addAll([PAGE, ...ASSETS].map((url) => new Request(url, { cache: "reload" })));
      await self.skipWaiting(); // a new version takes over at once: the page has no state here
    })(),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (name.startsWith("tessera-scan-") && name !== CACHE) await caches.delete(name);
      }
      await self.clients.claim(); // control the page that registered us, without a reload
    })(),
  );
});

async function networkFirst(request) {
  const cache = await caches.open(CACHE);
  try {
    const response = await fetch(request);
    if (response.ok) await cache.put(PAGE, response.clone());
    return response;
  } catch (error) {
    const cached = await cache.match(PAGE);
    if (cached) return cached;
    throw error;
  }
}

async function cacheFirst(request) {
  const cache = await caches.open(CACHE);
  const cached = await cache.match(request, { ignoreSearch: true });
  if (cached) return cached;
  const response = await fetch(request);
  if (response.ok) await cache.put(request, response.clone());
  return response;
}

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.origin !== self.location.origin) return;
  if (url.pathname === PAGE) event.respondWith(networkFirst(event.request));
  else if (ASSETS.includes(url.pathname)) event.respondWith(cacheFirst(event.request));
  // Everything else (the API above all) goes to the network as if we were not here.
});
