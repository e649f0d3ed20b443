// adslot's reference player: asks one slot ahead, resolves the VAST wrapper, plays on time, fires the
// impression and quartiles of both VAST layers, and keeps every fire of its own ad server in IndexedDB with
// the time it was played until the server has acknowledged it (live, or later in a Proof-of-Play batch).
// Served by adslot at {base}/player/; opened as {base}/player/#key=...&venue=...&screen=... (the key stays
// in the fragment: it is never sent in a URL, so no access log holds it).
import {VASTClient} from './vendor/vast-client.min.js';

const VERSION = '1.0.0';
const QUARTILES = [['firstQuartile', 0.25], ['midpoint', 0.5], ['thirdQuartile', 0.75], ['complete', 1]];
const MEDIA_CACHE = 'adslot-media-v1';
const SKEW = 60;  // seconds of play_time skew the server tolerates (ADSLOT_PLAY_TIME_SKEW_SECONDS default)
const BATCH = 500;  // fires per Proof-of-Play batch (the server takes up to 1,000)
const LIVE_GRACE_MS = 15000;  // a fire sent live and not acknowledged for this long goes in a batch
const RING = 50;  // recent plays and errors kept for the overlay and status: bounded, so memory stays flat

const scope = new URL('.', location.href);
const basePath = scope.pathname.replace(/\/player\/$/, '');
const base = location.origin + basePath;
const fragment = new URLSearchParams(location.hash.slice(1));
const query = new URLSearchParams(location.search);
const key = fragment.get('key') || '';
const venue = fragment.get('venue') || '';
const screen = fragment.get('screen') || null;

function bounded(name, low, high) {
  const raw = query.get(name);
  if (raw === null || raw === '') return null;
  const value = Number(raw);
  return Number.isFinite(value) ? Math.min(high, Math.max(low, value)) : null;
}

const overrides = {slot: bounded('slot', 1, 3600), lead: bounded('lead', 1, 3600)};
const statusEvery = bounded('status', 1, 3600) || 60;
const stage = {
  video: document.getElementById('ad'),
  image: document.getElementById('house'),
  message: document.getElementById('message'),
  overlay: document.getElementById('overlay'),
};
const state = {
  version: VERSION, venue, screen, slotSeconds: 15, leadSeconds: 30, fallback: [],
  online: navigator.onLine, stopped: null, plays: [], errors: 0, lastError: null, lastAdRequest: null,
  firesQueued: 0, uploaded: 0, cacheBytes: 0, held: 0, backoffUntil: 0, adsPlayed: 0, fallbacks: 0,
};
window.adslotPlayer = state;  // read by the debug overlay, by tests and by anyone debugging a screen

// IndexedDB: fires (the Proof of Play not yet acknowledged), ads (held, not yet played), meta (config).
let db = null;
function openDb() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(`adslot-player ${basePath || '/'} ${venue} ${screen || ''}`, 1);
    request.onupgradeneeded = () => {
      const made = request.result;
      made.createObjectStore('fires', {keyPath: 'seq', autoIncrement: true});
      made.createObjectStore('ads', {keyPath: 'uuid'});
      made.createObjectStore('meta');
    };
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

function store(name, mode, work) {
  return new Promise((resolve, reject) => {
    const transaction = db.transaction(name, mode);
    let result;
    const request = work(transaction.objectStore(name));
    if (request) request.onsuccess = () => { result = request.result; };
    transaction.oncomplete = () => resolve(result);  // resolved once durable: the write is committed
    transaction.onerror = () => reject(transaction.error);
    transaction.onabort = () => reject(transaction.error);
  });
}

const put = (name, value, id) => store(name, 'readwrite', (s) => (id === undefined ? s.put(value) : s.put(value, id)));
const remove = (name, id) => store(name, 'readwrite', (s) => s.delete(id));
const getOne = (name, id) => store(name, 'readonly', (s) => s.get(id));
const getAll = (name) => store(name, 'readonly', (s) => s.getAll());
const count = (name) => store(name, 'readonly', (s) => s.count());

function removeMany(name, ids) {
  return store(name, 'readwrite', (s) => { for (const id of ids) s.delete(id); });
}

function oldestFires(limit) {
  // Oldest first (seq order); a fire sent live is left to its own answer for LIVE_GRACE_MS.
  return new Promise((resolve, reject) => {
    const found = [];
    const cutoff = Date.now() - LIVE_GRACE_MS;
    const cursor = db.transaction('fires', 'readonly').objectStore('fires').openCursor();
    cursor.onsuccess = () => {
      const at = cursor.result;
      if (!at || found.length >= limit) return resolve(found);
      if (!at.value.live || at.value.at < cutoff) found.push(at.value);
      at.continue();
    };
    cursor.onerror = () => reject(cursor.error);
  });
}

function noteError(where, error) {
  state.errors += 1;
  state.lastError = `${new Date().toISOString()} ${where}: ${error && error.message ? error.message : error}`;
}

function remember(entry) {
  state.plays.push(entry);
  if (state.plays.length > RING) state.plays.shift();
}

function stop(message) {
  state.stopped = message;
  stage.message.textContent = message;
  stage.message.hidden = false;
  stage.video.classList.remove('on');
  stage.image.classList.remove('on');
  stage.video.pause();
}

async function refused(answer) {
  // A revoked or unknown key (401) or one without the ad_request scope (403): the screen stops, and says so.
  let code = '';
  try { code = (await answer.json()).error.code; } catch (_) { /* no JSON body */ }
  if (code === 'invalid_api_key') stop('This screen\'s player link was revoked. Ask your adslot admin for a new link.');
  else stop(`This screen's player key is refused (${code || answer.status}). Ask your adslot admin for a new link.`);
}

function backOff(answer) {
  // 429 and 503 say when to come back (Retry-After, seconds); without it, one slot.
  const seconds = Number(answer.headers.get('retry-after'));
  const wait = Number.isFinite(seconds) && seconds > 0 ? seconds : state.slotSeconds;
  state.backoffUntil = Math.max(state.backoffUntil, Date.now() + wait * 1000);
}

function api(path, init = {}) {
  const headers = {'Ssp-Key': key, ...(init.headers || {})};
  return fetch(base + path, {...init, headers, cache: 'no-store', credentials: 'omit'});
}

// Media, in Cache Storage (the service worker serves the same cache to the page when it asks for a URL).
async function cacheMedia(url) {
  const cache = await caches.open(MEDIA_CACHE);
  if (await cache.match(url)) return;
  let answer;
  try {
    answer = await fetch(url, {credentials: 'omit'});
  } catch (_) {
    answer = await fetch(url, {mode: 'no-cors', credentials: 'omit'});  // another origin without CORS
  }
  if (answer.type !== 'opaque' && !answer.ok) throw new Error(`media ${answer.status}: ${url}`);
  await cache.put(url, answer);
}

async function mediaSource(url) {
  const found = await (await caches.open(MEDIA_CACHE)).match(url);
  if (found && found.type !== 'opaque') return URL.createObjectURL(await found.blob());
  return url;
}

async function measureCache() {
  try {
    const estimate = await navigator.storage.estimate();
    state.cacheBytes = estimate.usage || 0;
  } catch (_) { /* not offered */ }
}

// The fires. Adslot's own pixels are written to IndexedDB first, then sent; only an answer removes them.
function ownPixel(url) {
  let parsed;
  try { parsed = new URL(url, base); } catch (_) { return null; }
  if (parsed.origin !== location.origin) return null;
  const path = parsed.pathname.replace(/\/$/, '');
  const uuid = parsed.searchParams.get('ad_request_uuid');
  if (!uuid) return null;
  const layer = parsed.searchParams.get('layer') === 'inline' ? 'inline' : 'wrapper';
  if (path === `${basePath}/api/v1/ad/callback`) return {ad_request_uuid: uuid, event: 'impression', layer};
  if (path === `${basePath}/api/v1/ad/tracking/video`) {
    return {ad_request_uuid: uuid, event: parsed.searchParams.get('event'), layer};
  }
  return null;
}

function expand(url, errorCode) {
  return url
    .replace(/\[CACHEBUSTING\]|%%CACHEBUSTER%%/g, String(Math.floor(Math.random() * 1e8)).padStart(8, '0'))
    .replace(/\[TIMESTAMP\]/g, encodeURIComponent(new Date().toISOString()))
    .replace(/\[ERRORCODE\]/g, String(errorCode || 900));
}

async function fire(url) {
  const own = ownPixel(url);
  if (own === null) {
    if (navigator.onLine) fetch(expand(url), {mode: 'no-cors', credentials: 'omit', keepalive: true}).catch(() => {});
    return;
  }
  const fired = {...own, played_at: Math.floor(Date.now() / 1000), at: Date.now(), live: navigator.onLine};
  const seq = await put('fires', fired);
  state.firesQueued += 1;
  if (!fired.live) return;
  try {
    const answer = await fetch(url, {credentials: 'omit', cache: 'no-store'});
    // Any verdict (counted, duplicate, late, released...) is final; a 5xx or 429 is not.
    if (answer.status < 500 && answer.status !== 429 && answer.status !== 408) {
      await remove('fires', seq);
      state.firesQueued = Math.max(0, state.firesQueued - 1);
      return;
    }
  } catch (_) { /* the network dropped: the batch takes it */ }
  await put('fires', {...fired, seq, live: false});
}

let uploading = false;
async function upload() {
  if (uploading || state.stopped || !navigator.onLine || Date.now() < state.backoffUntil) return;
  uploading = true;
  try {
    for (let round = 0; round < 20; round++) {
      const fires = await oldestFires(BATCH);
      if (!fires.length) break;
      const body = {fires: fires.map((f) => ({
        ad_request_uuid: f.ad_request_uuid, event: f.event, played_at: f.played_at, layer: f.layer,
      }))};
      const answer = await api('/api/v1/ad/pop/batch', {
        method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body),
      });
      if (answer.status === 200) {
        await removeMany('fires', fires.map((f) => f.seq));
        state.uploaded += fires.length;
      } else if (answer.status === 400) {
        // One malformed fire refuses the batch: it can never count, so it alone is dropped.
        const error = (await answer.json()).error || {};
        const index = Number(/^fires\[(\d+)\]/.exec(error.field || '')?.[1]);
        noteError('upload', `${error.code} ${error.field}`);
        if (!Number.isInteger(index)) break;
        await remove('fires', fires[index].seq);
      } else if (answer.status === 401 || answer.status === 403) {
        await refused(answer);
        break;
      } else {
        if (answer.status === 429 || answer.status === 503) backOff(answer);
        noteError('upload', `HTTP ${answer.status}`);
        break;
      }
    }
  } catch (error) {
    noteError('upload', error);
  } finally {
    state.firesQueued = await count('fires');
    uploading = false;
  }
}

// Ad requests, one slot ahead.
const vast = new VASTClient(0, 0);
let held = [];  // {uuid | null (204), play_time, expires_at, ready, media_url, duration, urls...}, by play_time

function playable(media) {
  return media.filter((m) => (m.mimeType || '').startsWith('video/') && stage.video.canPlayType(m.mimeType))[0]
    || media[0];
}

function templates(list) {
  return (list || []).map((t) => (typeof t === 'string' ? t : t.url)).filter(Boolean);
}

async function requestAd(playTime) {
  state.lastAdRequest = {at: Math.floor(Date.now() / 1000), play_time: playTime, status: null};
  const answer = await api('/api/v1/ad/request?format=json', {
    method: 'POST',
    headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({venue_id: venue, screen_id: screen, play_time: playTime}),
  });
  state.lastAdRequest.status = answer.status;
  if (answer.status === 204) return {uuid: null, play_time: playTime};
  if (answer.status === 401 || answer.status === 403) { await refused(answer); return null; }
  if (answer.status === 429 || answer.status === 503) { backOff(answer); return null; }
  if (!answer.ok) throw new Error(`ad request HTTP ${answer.status}`);
  const {data} = await answer.json();
  const wrapper = new DOMParser().parseFromString(data.vast_tag, 'text/xml');
  const response = await vast.parseVAST(wrapper);  // follows VASTAdTagURI to the inline, merging both layers
  const ad = response.ads[0];
  const creative = ad && ad.creatives.find((c) => c.type === 'linear');
  const entry = {
    uuid: data.ad_request_uuid, play_time: playTime, expires_at: data.ad_request_expired_at, ready: false,
  };
  if (!creative || !creative.mediaFiles.length) {
    const urls = templates(response.errorURLTemplates || (ad && ad.errorURLTemplates));
    await failAd({...entry, errors: urls}, 'the VAST has no playable linear creative', 303);
    return {uuid: null, play_time: playTime};
  }
  const media = playable(creative.mediaFiles);
  Object.assign(entry, {
    media_url: media.fileURL,
    duration: creative.duration > 0 ? creative.duration : state.slotSeconds,
    impressions: templates(ad.impressionURLTemplates),
    tracking: Object.fromEntries(['start', ...QUARTILES.map(([e]) => e)].map(
      (e) => [e, (creative.trackingEvents[e] || []).map((t) => (typeof t === 'string' ? t : t.url))],
    )),
    errors: templates(ad.errorURLTemplates),
  });
  await put('ads', entry);
  try {
    await cacheMedia(entry.media_url);
  } catch (error) {
    await failAd(entry, error, 401);
    return {uuid: null, play_time: playTime};
  }
  entry.ready = true;
  await put('ads', entry);
  return entry;
}

async function failAd(entry, error, code) {
  // Media that does not load or play: its VAST Error URLs, then the slot given back to the ad server.
  noteError(`ad ${entry.uuid}`, error);
  remember({kind: 'failed', uuid: entry.uuid, at: Date.now(), reason: String(error && error.message || error)});
  for (const url of entry.errors || []) fetch(expand(url, code), {mode: 'no-cors', credentials: 'omit'}).catch(() => {});
  held = held.filter((h) => h.uuid !== entry.uuid);
  try { await remove('ads', entry.uuid); } catch (_) { /* gone already */ }
  try {
    await api(`/api/v1/ad/request/${entry.uuid}/release`, {method: 'POST'});
  } catch (releaseError) {
    noteError('release', releaseError);  // it expires unplayed on its own: the server releases it then
  }
}

let planned = 0;  // the play_time (ms) of the last slot asked for
let asking = false;
async function topUp(nextStart) {
  if (asking || state.stopped) return;
  asking = true;
  try {
    const slotMs = state.slotSeconds * 1000;
    planned = Math.max(planned, nextStart - slotMs);
    while (!state.stopped && planned + slotMs - state.leadSeconds * 1000 <= Date.now()) {
      if (!navigator.onLine || Date.now() < state.backoffUntil) break;
      const playTime = Math.ceil((planned + slotMs) / 1000);
      let entry;
      try {
        entry = await requestAd(playTime);
      } catch (error) {
        noteError('ad request', error);
        break;
      }
      if (entry === null) break;  // backing off or stopped
      planned += slotMs;
      held.push(entry);
      held.sort((a, b) => a.play_time - b.play_time);
    }
  } finally {
    state.held = held.filter((h) => h.uuid).length;
    asking = false;
  }
}

// Playback.
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, Math.max(0, ms)); });

function show(element) {
  for (const other of [stage.video, stage.image]) other.classList.toggle('on', other === element);
}

function clearVideo(source) {
  stage.video.pause();
  stage.video.removeAttribute('src');
  stage.video.load();
  if (source && source.startsWith('blob:')) URL.revokeObjectURL(source);
}

async function startVideo(source, loop) {
  const video = stage.video;
  video.loop = loop;
  video.muted = true;
  video.src = source;
  let onError;
  const failed = new Promise((_, reject) => {
    onError = () => reject(new Error(`media error ${video.error ? video.error.code : ''}`));
    video.addEventListener('error', onError, {once: true});
  });
  try {
    await Promise.race([video.play(), failed, sleep(10000).then(() => { throw new Error('media did not start'); })]);
  } finally {
    video.removeEventListener('error', onError);
  }
}

async function playAd(entry) {
  held = held.filter((h) => h !== entry);
  await remove('ads', entry.uuid);  // taken: after a reload it is not played twice
  const source = await mediaSource(entry.media_url);
  try {
    await startVideo(source, true);  // looped: the creative plays for its declared duration
  } catch (error) {
    clearVideo(source);
    await failAd(entry, error, 405);
    return false;
  }
  show(stage.video);
  const started = performance.now();
  const record = {kind: 'ad', uuid: entry.uuid, at: Date.now(), play_time: entry.play_time};
  remember(record);
  state.adsPlayed += 1;
  for (const url of [...entry.impressions, ...entry.tracking.start]) fire(url).catch((e) => noteError('fire', e));
  for (const [event, share] of QUARTILES) {
    await sleep(started + share * entry.duration * 1000 - performance.now());
    for (const url of entry.tracking[event]) fire(url).catch((e) => noteError('fire', e));
  }
  clearVideo(source);
  show(null);
  return true;
}

let fallbackTurn = 0;
async function playFallback(seconds) {
  state.fallbacks += 1;
  const items = state.fallback;
  remember({kind: 'fallback', at: Date.now()});
  if (!items.length) { show(null); await sleep(seconds * 1000); return; }
  const item = items[fallbackTurn++ % items.length];
  const source = await mediaSource(item.url);
  const until = performance.now() + seconds * 1000;
  if ((item.mime_type || '').startsWith('video/')) {
    try {
      await startVideo(source, true);
      show(stage.video);
    } catch (error) {
      noteError('fallback', error);
    }
    await sleep(until - performance.now());
    clearVideo(source);
  } else {
    stage.image.src = source;
    show(stage.image);
    await sleep(until - performance.now());
    stage.image.removeAttribute('src');
    if (source.startsWith('blob:')) URL.revokeObjectURL(source);
  }
  show(null);
}

function nextPlayable(now) {
  // The first held slot whose play window is open: an empty one (204) plays the fallback.
  while (held.length) {
    const head = held[0];
    if (head.uuid === null) { held.shift(); return head; }
    if (head.play_time - SKEW > now / 1000) return null;  // not yet
    if (now / 1000 + head.duration >= head.expires_at) {
      held.shift();
      remove('ads', head.uuid).catch(() => {});  // its window closed: the server lets it expire
      continue;
    }
    return head.ready ? head : null;
  }
  return null;
}

async function runSlots() {
  let nextStart = Date.now() + 1000;
  for (;;) {
    if (state.stopped) return;
    topUp(nextStart);
    await sleep(nextStart - Date.now());
    if (state.stopped) return;
    const slotStart = Date.now();
    const entry = nextPlayable(slotStart);
    const played = entry && entry.uuid ? await playAd(entry) : false;
    if (!played) await playFallback(Math.max(0.5, state.slotSeconds - (Date.now() - slotStart) / 1000));
    nextStart = Math.max(slotStart + state.slotSeconds * 1000, Date.now());
  }
}

// Configuration, the creative manifest and the status report.
async function loadConfig() {
  let config = null;
  try {
    const params = new URLSearchParams({venue_id: venue});
    if (screen) params.set('screen_id', screen);
    const answer = await api(`/api/v1/player/config?${params}`);
    if (answer.status === 401 || answer.status === 403) { await refused(answer); return; }
    if (answer.ok) {
      config = (await answer.json()).data;
      await put('meta', config, 'config');
    }
  } catch (_) { /* offline: the last one known */ }
  if (config === null) config = await getOne('meta', 'config');
  if (config) {
    state.slotSeconds = config.slot_seconds;
    state.leadSeconds = config.lead_seconds;
    state.fallback = config.fallback || [];
  } else {
    state.fallback = [{url: new URL('house.svg', scope).href, mime_type: 'image/svg+xml'}];
  }
  if (overrides.slot) state.slotSeconds = overrides.slot;
  if (overrides.lead) state.leadSeconds = overrides.lead;
  for (const item of state.fallback) cacheMedia(item.url).catch((e) => noteError('fallback cache', e));
}

async function precache() {
  if (!navigator.onLine || state.stopped) return;
  try {
    const params = new URLSearchParams({venue_id: venue});
    if (screen) params.set('screen_id', screen);
    const answer = await api(`/api/v1/ad/manifest?${params}`);
    if (answer.status === 401 || answer.status === 403) { await refused(answer); return; }
    if (!answer.ok) return;
    const listed = new Set();
    for (const creative of (await answer.json()).data.creatives) {
      listed.add(creative.media_url);
      try { await cacheMedia(creative.media_url); } catch (error) { noteError('precache', error); }
    }
    // Media neither listed, held nor a fallback is dropped, so the cache follows the manifest.
    for (const item of state.fallback) listed.add(item.url);
    for (const entry of held) if (entry.media_url) listed.add(entry.media_url);
    const cache = await caches.open(MEDIA_CACHE);
    for (const request of await cache.keys()) if (!listed.has(request.url)) await cache.delete(request);
  } catch (error) {
    noteError('precache', error);
  }
  await measureCache();
}

async function report() {
  if (!navigator.onLine || state.stopped) return;
  await measureCache();
  const body = {
    venue_id: venue, screen_id: screen, version: VERSION, fires_queued: state.firesQueued,
    cache_bytes: state.cacheBytes, errors: state.errors, last_error: state.lastError,
    last_ad_request_at: state.lastAdRequest ? state.lastAdRequest.at : null,
  };
  try {
    const answer = await api('/api/v1/player/status', {
      method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body),
    });
    if (answer.status === 401 || answer.status === 403) await refused(answer);
  } catch (_) { /* the next one */ }
}

function drawOverlay() {
  if (stage.overlay.hidden) return;
  const last = state.plays[state.plays.length - 1];
  stage.overlay.textContent = [
    `adslot player ${VERSION}  ${venue}${screen ? ' / ' + screen : ''}  ${navigator.onLine ? 'online' : 'OFFLINE'}`,
    `slot ${state.slotSeconds} s, lead ${state.leadSeconds} s, ads held ${state.held}`,
    `last ad request ${state.lastAdRequest ? new Date(state.lastAdRequest.at * 1000).toISOString() + ' → ' + state.lastAdRequest.status : '—'}`,
    `fires queued ${state.firesQueued}, uploaded ${state.uploaded}, cache ${(state.cacheBytes / 1048576).toFixed(1)} MB`,
    `ads played ${state.adsPlayed}, fallbacks ${state.fallbacks}, last ${last ? last.kind + ' ' + (last.uuid || '') : '—'}`,
    `errors ${state.errors}${state.lastError ? ': ' + state.lastError : ''}`,
  ].join('\n');
}

function every(seconds, work) {
  const tick = async () => {
    try { await work(); } catch (error) { noteError('timer', error); }
    setTimeout(tick, seconds * 1000);
  };
  setTimeout(tick, 0);
}

async function main() {
  stage.overlay.hidden = query.get('debug') !== '1';
  document.addEventListener('keydown', (event) => {
    if (event.key === 'd' || event.key === 'D') { stage.overlay.hidden = !stage.overlay.hidden; drawOverlay(); }
  });
  if (!key || !venue) {
    stop('Open this screen\'s player link (made in the adslot console or with `adslot screens player-link`).');
    return;
  }
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('sw.js', {scope: './'}).catch((error) => noteError('service worker', error));
  }
  addEventListener('online', () => { state.online = true; upload(); });
  addEventListener('offline', () => { state.online = false; });
  db = await openDb();
  const kept = await getAll('ads');  // held before a reload or a power cut: played while their window is open
  for (const entry of kept) if (!entry.ready) await remove('ads', entry.uuid);
  held = kept.filter((entry) => entry.ready).sort((a, b) => a.play_time - b.play_time);
  state.firesQueued = await count('fires');
  await loadConfig();
  if (state.stopped) return;
  if (window.top === window) {
    document.documentElement.requestFullscreen?.().catch(() => {});  // allowed on a kiosk; harmless otherwise
  }
  every(Math.min(5, state.slotSeconds), upload);
  every(600, precache);
  every(statusEvery, report);
  every(1, drawOverlay);
  runSlots().catch((error) => { noteError('slots', error); stop(`The player stopped: ${error.message}`); });
}

main();
