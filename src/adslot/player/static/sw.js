// adslot player's service worker: the player's own files from the network when it answers, else from the
// cache (so a reload while offline still starts the player), and creative media from the cache the page fills
// (so a slot never waits for a download). The API is never intercepted.
const SHELL_CACHE = 'adslot-player-shell-1.0.0';
const MEDIA_CACHE = 'adslot-media-v1';
const SHELL = ['./', 'player.js', 'player.css', 'house.svg', 'vendor/vast-client.min.js'];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(SHELL_CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith('adslot-player-shell-') && name !== SHELL_CACHE) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

const scope = new URL(self.registration.scope);

async function shell(request) {
  const cache = await caches.open(SHELL_CACHE);
  try {
    const answer = await fetch(request);
    if (answer.ok) await cache.put(request.mode === 'navigate' ? './' : request, answer.clone());
    return answer;
  } catch (error) {
    const kept = await cache.match(request.mode === 'navigate' ? './' : request, {ignoreSearch: true});
    if (kept) return kept;
    throw error;
  }
}

async function media(request) {
  const kept = await (await caches.open(MEDIA_CACHE)).match(request.url);
  return kept || fetch(request);
}

self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (request.method !== 'GET') return;
  const url = new URL(request.url);
  if (url.origin === scope.origin && url.pathname.startsWith(scope.pathname)) {
    event.respondWith(shell(request));
  } else if (!url.pathname.includes('/api/')) {
    event.respondWith(media(request));
  }
});
