// The door scanner: sign in once with a check-in API key, pick the event, and check tickets in,
// with a network or without one (docs/scanner.md).
//
// Every signed ticket code is decided here, from what the last sync left in the browser (the
// project's public keys, the event's tickets): the verdict never waits for the network. An OK
// counts the use at once and queues the scan; the queue goes up to POST /v1/checkins/batch
// whenever the server can be reached, and the server's answer to each scan is compared with
// what the door said. Only a code that is not a signed one goes to the server, and only online.

import { judge, WORDS, base64urlDecode } from "./secret.js";
import { Store } from "./store.js";

const SYNC_EVERY_MS = 30_000;
const UPLOAD_EVERY_MS = 5_000;
const CHUNK = 500; // scans per batch: the API's limit
const LAST_SCANS = 20;
const TIME = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });
const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const DAY = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });

// What the door says under the word, for the outcomes decided here.
const DETAILS = {
  revoked: "This code was replaced by a newer one (the ticket was reissued or passed on).",
  invalid: "The code's signature does not hold: a damaged or forged code.",
  unknown: "Not a ticket code this scanner knows.",
  wrong_event: "A genuine ticket, but not for this event.",
};
// What a server's answer to an uploaded OK means, when it is not "ok" too.
const CONFLICTS = {
  already_checked_in: "conflict: already checked in elsewhere",
  revoked: "conflict: the server says the code was revoked",
  invalid: "conflict: the server says the code is invalid",
  unknown: "conflict: the server does not know the ticket",
  wrong_event: "conflict: the server says it is another event's",
  held_outside: "conflict: the ticket is held outside the project",
};

const $ = (id) => document.getElementById(id);

/** A failed fetch: no network, or the server did not answer. */
class Unreachable extends Error {}
/** A 401 or 403: the API key is no longer good. */
class KeyRefused extends Error {}

// The page's memory; the store mirrors all of it, so that a reload (or a restart of the phone)
// finds it again.
const state = {
  store: null,
  apiKey: null,
  device: null, // this device's id in the scans it uploads: "scanner-" + 8 hex digits
  events: [],
  eventId: null,
  keys: new Map(), // kid -> public key bytes
  syncedKeys: [], // the keys as the sync gave them, for the store
  tickets: new Map(), // ticket id -> ticket (the sync's, with the uses counted here)
  cursor: null,
  syncedAt: null, // ms since the epoch
  queue: new Map(), // nonce -> scan waiting to be uploaded
  uploadedAt: new Map(), // ticket id -> when the server took its last scan (performance.now())
  scans: [], // the last scans shown, newest first
  reachable: true, // whether the server answered the last call
  keyRefused: false, // stops syncing and uploading until the next sign-in
  syncing: null,
  uploading: null,
  deciding: Promise.resolve(), // scans are decided one after the other, in the order typed
};

// ---------------------------------------------------------------------------------------------
// The API

/** The JSON answer of the API: `{status, body}`; a 401/403 throws KeyRefused, no answer at all
 * Unreachable. */
async function api(method, path, body) {
  const headers = { "x-api-key": state.apiKey, accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
  } catch (error) {
    reached(false);
    throw new Unreachable(String(error));
  }
  reached(true);
  const answer = await response.json().catch(() => null);
  if (response.status === 401 || response.status === 403) {
    throw new KeyRefused(messageOf(answer) ?? `HTTP ${response.status}`);
  }
  return { status: response.status, body: answer };
}

/** The message of an error body: `{"errors": [{"message"}]}` (or plain strings), or
 * `{"message"}`. */
function messageOf(body) {
  if (body === null || typeof body !== "object") return null;
  if (Array.isArray(body.errors) && body.errors.length > 0) {
    return body.errors.map((e) => (typeof e === "string" ? e : e.message)).join("; ");
  }
  return typeof body.message === "string" ? body.message : null;
}

function refuseKey(error) {
  state.keyRefused = true;
  $("key-problem-text").textContent =
    `The API key was refused (${error.message}): uploads and syncs have stopped. Enter a new ` +
    "check-in key: the scans waiting to upload are kept, and go up with it.";
  $("key-problem").hidden = false;
}

// ---------------------------------------------------------------------------------------------
// What the page shows

function show(element, text) {
  element.textContent = text;
  element.hidden = false;
}

function showOnly(section) {
  for (const id of ["loading", "sign-in", "pick", "door"]) $(id).hidden = id !== section;
  $("sign-out").hidden = section !== "pick" && section !== "door";
}

function reached(answered) {
  if (state.reachable === answered) return;
  state.reachable = answered;
  showNetwork();
}

/** Online, offline, or online but the server does not answer (a network of its own at the
 * door, a server down): the last two are the same to the scanner. */
function showNetwork() {
  const online = navigator.onLine;
  const text = !online ? "Offline" : state.reachable ? "Online" : "Server unreachable";
  $("network").textContent = text;
  $("network").dataset.online = String(online && state.reachable);
}

function showStanding() {
  $("pending").textContent = String(state.queue.size);
  $("ticket-count").textContent = String(state.tickets.size);
  $("synced").textContent = state.syncedAt === null ? "never" : DATE_TIME.format(state.syncedAt);
}

function showVerdict(outcome, detail, at) {
  const verdict = $("verdict");
  verdict.dataset.outcome = outcome;
  $("verdict-word").textContent = WORDS[outcome];
  $("verdict-detail").textContent = detail;
  $("verdict-time").textContent = `Scanned at ${TIME.format(at)}`;
  // Restart the flash: two verdicts alike in a row still look like two.
  verdict.classList.remove("fresh");
  void verdict.offsetWidth;
  verdict.classList.add("fresh");
}

function showScans() {
  const list = $("scans");
  list.replaceChildren(
    ...state.scans.map((scan) => {
      const item = document.createElement("li");
      const time = document.createElement("time");
      time.dateTime = scan.at;
      time.textContent = TIME.format(new Date(scan.at));
      const outcome = document.createElement("span");
      outcome.className = `outcome ${scan.outcome}`;
      outcome.textContent = WORDS[scan.outcome];
      const about = document.createElement("span");
      about.className = "about";
      about.textContent = [scan.holder, scan.standing].filter(Boolean).join(" · ");
      item.append(time, outcome, about);
      if (scan.conflict) {
        const conflict = document.createElement("span");
        conflict.className = "conflict";
        conflict.textContent = scan.conflict;
        item.append(conflict);
      }
      return item;
    }),
  );
  $("no-scans").hidden = state.scans.length > 0;
}

const when = (seconds) => DATE_TIME.format(new Date(seconds * 1000));

function holderOf(ticket) {
  return ticket?.holder_name || "No name given";
}

/** The seat of a seated product's ticket, as the ticket says it; "" for none. */
function seatOf(ticket) {
  const seat = ticket?.seat;
  return seat ? `${seat.area}, row ${seat.row}, seat ${seat.number}` : "";
}

// ---------------------------------------------------------------------------------------------
// Signing in and out, the event

async function signIn(event) {
  event.preventDefault();
  const problem = $("sign-in-problem");
  problem.hidden = true;
  state.apiKey = $("api-key").value.trim();
  let events;
  try {
    const { status, body } = await api("GET", "/v1/checkins/events");
    if (status !== 200) throw new Error(messageOf(body) ?? `HTTP ${status}`);
    events = body.events;
  } catch (error) {
    state.apiKey = null;
    const why =
      error instanceof KeyRefused
        ? `This key was refused: ${error.message}`
        : error instanceof Unreachable
          ? "The server cannot be reached: signing in needs a network, once."
          : `Signing in failed: ${error.message}`;
    show(problem, why);
    return;
  }
  // A key of another project would upload the waiting scans to it, which refuses them, and
  // they would leave the queue: lost. The new key must know every event a waiting scan is for.
  const known = new Set(events.map((e) => e.id));
  const strangers = new Set([...state.queue.values()].map((scan) => scan.event_id));
  for (const id of known) strangers.delete(id);
  if (strangers.size > 0) {
    state.apiKey = null;
    show(
      problem,
      `This key is of another project: ${state.queue.size} scans waiting to upload are for an ` +
        "event it does not know. Enter a key of the project they were scanned for.",
    );
    return;
  }
  state.events = events;
  state.keyRefused = false;
  $("key-problem").hidden = true;
  state.device ??= `scanner-${randomHex(4)}`;
  await state.store.set({ apiKey: state.apiKey, device: state.device, events });
  $("api-key").value = "";
  showPick();
}

function randomHex(bytes) {
  const random = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function showPick() {
  // Fresh names when the server answers; the list kept from the last time when it does not.
  try {
    const { status, body } = await api("GET", "/v1/checkins/events");
    if (status === 200) {
      state.events = body.events;
      await state.store.set({ events: state.events });
    }
  } catch (error) {
    if (error instanceof KeyRefused) refuseKey(error);
  }
  const select = $("event");
  select.replaceChildren(
    ...state.events.map((event) => {
      const option = document.createElement("option");
      option.value = event.id;
      const where = event.location ? `, ${event.location}` : "";
      option.textContent = `${event.name} (${DAY.format(new Date(event.start_date * 1000))}${where})`;
      option.selected = event.id === state.eventId;
      return option;
    }),
  );
  const none = state.events.length === 0;
  $("pick-problem").hidden = !none;
  if (none) $("pick-problem").textContent = "This project has no events to check in to.";
  showOnly("pick");
  select.focus();
}

async function pickEvent(event) {
  event.preventDefault();
  const chosen = $("event").value;
  if (!chosen) return;
  if (chosen !== state.eventId) {
    // Another event: its own tickets and cursor. The queue stays (each scan names its event).
    state.eventId = chosen;
    state.tickets = new Map();
    state.cursor = null;
    state.syncedAt = null;
    await state.store.clear("tickets");
    await state.store.set({ eventId: chosen, cursor: undefined, syncedAt: undefined });
  }
  showDoor();
  sync();
  upload();
}

function showDoor() {
  const event = state.events.find((e) => e.id === state.eventId);
  $("event-name").textContent = event ? event.name : "Unknown event";
  showStanding();
  showScans();
  showOnly("door");
  $("secret").focus();
}

async function signOut() {
  const waiting = state.queue.size;
  if (
    waiting > 0 &&
    !confirm(
      `${waiting === 1 ? "1 scan has" : `${waiting} scans have`} not been uploaded yet: signing out ` +
        "forgets them, and the server will never count them. Sign out anyway?",
    )
  ) {
    return;
  }
  stopCamera();
  await state.store.destroy();
  Object.assign(state, {
    apiKey: null,
    device: null,
    events: [],
    eventId: null,
    keys: new Map(),
    syncedKeys: [],
    tickets: new Map(),
    cursor: null,
    syncedAt: null,
    queue: new Map(),
    scans: [],
    keyRefused: false,
  });
  $("key-problem").hidden = true;
  $("verdict").dataset.outcome = "";
  $("verdict-word").textContent = "Ready";
  $("verdict-detail").textContent = "Waiting for the first scan.";
  $("verdict-time").textContent = "";
  showOnly("sign-in");
  $("api-key").focus();
}

// ---------------------------------------------------------------------------------------------
// Sync: the keys and the event's tickets, then only what changed since the cursor

/** The synced ticket, unless the one here is newer: a lower version is an older answer, and a
 * use counted here but not yet uploaded stays counted until the server has it. */
function merged(local, synced, waiting) {
  if (local === undefined) return synced;
  if (synced.ticket_version < local.ticket_version) return local;
  if (waiting && local.redemption_count > synced.redemption_count) {
    return {
      ...synced,
      redemption_count: local.redemption_count,
      checked_in_at: synced.checked_in_at ?? local.checked_in_at,
    };
  }
  return synced;
}

function sync() {
  if (state.eventId === null || state.keyRefused || !navigator.onLine) return Promise.resolve();
  state.syncing ??= (async () => {
    try {
      const eventId = state.eventId;
      const query = new URLSearchParams({ event_id: eventId });
      if (state.cursor !== null) query.set("since", state.cursor);
      const asked = performance.now();
      const { status, body } = await api("GET", `/v1/checkins/sync?${query}`);
      if (status !== 200) {
        show($("page-problem"), `The sync failed: ${messageOf(body) ?? `HTTP ${status}`}`);
        return;
      }
      if (eventId !== state.eventId) return; // another event was picked meanwhile
      $("page-problem").hidden = true;
      // Every answer carries all the project's live keys: a key retired since stops here too.
      state.syncedKeys = body.keys.filter((key) => key.alg === "Ed25519");
      state.keys = new Map(state.syncedKeys.map((k) => [k.kid, base64urlDecode(k.public_key)]));
      // A use counted here stands until an answer that has it: one still queued, and one the
      // server took after this sync was asked for (the answer may have been read before it).
      const waiting = new Set(Array.from(state.queue.values(), (scan) => scan.ticket_id));
      for (const [id, at] of state.uploadedAt) {
        if (at >= asked) waiting.add(id);
        else state.uploadedAt.delete(id); // every answer from now on has it
      }
      const changed = [];
      for (const ticket of body.tickets) {
        const local = state.tickets.get(ticket.id);
        const kept = merged(local, ticket, waiting.has(ticket.id));
        if (kept !== local) {
          state.tickets.set(ticket.id, kept);
          changed.push(kept);
        }
      }
      state.cursor = body.cursor;
      state.syncedAt = Date.now();
      await state.store.write("tickets", changed);
      await state.store.set({
        keys: state.syncedKeys,
        cursor: state.cursor,
        syncedAt: state.syncedAt,
      });
      showStanding();
    } catch (error) {
      if (error instanceof KeyRefused) refuseKey(error);
      else if (!(error instanceof Unreachable)) throw error;
    } finally {
      state.syncing = null;
    }
  })();
  return state.syncing;
}

// ---------------------------------------------------------------------------------------------
// Scanning

function scanned(event) {
  event.preventDefault();
  const input = $("secret");
  const text = input.value.trim();
  input.value = "";
  input.focus();
  if (text) decideInTurn(text);
}

/** Decides `text` after the scans before it: a wedge scanner types faster than a verdict. */
function decideInTurn(text) {
  state.deciding = state.deciding.then(() => decide(text)).catch((error) => {
    show($("page-problem"), `Something went wrong with that scan: ${error.message}`);
  });
  return state.deciding;
}

async function decide(text) {
  const at = new Date();
  const judged = await judge(text, state.keys, state.tickets);
  if (judged === null) return askServer(text, at);
  const { outcome, ticket } = judged;
  const scan = {
    nonce: crypto.randomUUID(),
    at: at.toISOString(),
    outcome,
    holder: ticket ? holderOf(ticket) : null,
    standing: null,
    conflict: null,
  };
  let detail = DETAILS[outcome];
  if (outcome === "ok") detail = [holderOf(ticket), seatOf(ticket)].filter(Boolean).join(" · ");
  if (outcome === "already_checked_in") {
    detail = ticket.checked_in_at
      ? `${holderOf(ticket)}: checked in at ${when(ticket.checked_in_at)}`
      : `${holderOf(ticket)}: every use of this ticket is redeemed`;
  }
  showVerdict(outcome, detail, at);
  if (outcome === "ok") {
    // Counted here at once: the same code again is ALREADY CHECKED IN, online or not.
    const counted = {
      ...ticket,
      redemption_count: ticket.redemption_count + 1,
      checked_in_at: Math.floor(at.getTime() / 1000),
    };
    const queued = {
      secret: text.toUpperCase(),
      nonce: scan.nonce,
      event_id: state.eventId,
      scanned_at: scan.at,
      device: state.device,
      ticket_id: ticket.id, // the page's own: not sent
    };
    scan.standing = "waiting to upload";
    state.tickets.set(counted.id, counted);
    state.queue.set(queued.nonce, queued);
    remember(scan);
    await state.store.recordOk(counted, queued, scan);
    upload();
  } else {
    // Refusals are not uploaded: a ticket the door turned away (say, one issued after the last
    // sync) must not become a check-in on the server.
    remember(scan);
    await state.store.write("scans", [scan]);
  }
}

/** A code that is not a signed one: the server's to judge, if it can be reached. */
async function askServer(text, at) {
  const scan = { nonce: crypto.randomUUID(), at: at.toISOString(), holder: null, conflict: null };
  let outcome = "unknown";
  let detail = "Not a signed ticket code, and the server cannot be reached to check it.";
  if (navigator.onLine && !state.keyRefused) {
    try {
      const body = { secret: text, nonce: scan.nonce, event_id: state.eventId };
      const answer = await api("POST", "/v1/checkins", body);
      ({ outcome, detail } = serverVerdict(answer));
      if (answer.status === 200) scan.holder = detail;
      scan.standing = "answered by the server";
      if (answer.status === 200) await countServerCheckIn(answer.body);
    } catch (error) {
      if (error instanceof KeyRefused) refuseKey(error);
      else if (!(error instanceof Unreachable)) throw error;
    }
  }
  scan.outcome = outcome;
  showVerdict(outcome, detail, at);
  remember(scan);
  await state.store.write("scans", [scan]);
}

function serverVerdict({ status, body }) {
  if (status === 200) {
    const holder = body.holder ?? {};
    const name = [holder.first_name, holder.last_name].filter(Boolean).join(" ");
    return { outcome: "ok", detail: name || holder.email || "No name given" };
  }
  const reason = body?.reason;
  if (reason === "already_checked_in") {
    const at = body.checked_in_at ? `: checked in at ${when(body.checked_in_at)}` : "";
    return { outcome: reason, detail: `${body.message ?? "Already checked in"}${at}` };
  }
  if (reason in WORDS) return { outcome: reason, detail: body.message ?? DETAILS[reason] };
  // held_outside: the ticket cannot be used here, which the door says as INVALID.
  if (reason) return { outcome: "invalid", detail: body.message ?? reason };
  return { outcome: "unknown", detail: messageOf(body) ?? DETAILS.unknown };
}

/** The server checked a ticket in: the same ticket here says so too. */
async function countServerCheckIn(answer) {
  for (const ticket of state.tickets.values()) {
    if (ticket.item_id === answer.item_id && ticket.product_id === answer.product_id) {
      const counted = {
        ...ticket,
        redemption_count: answer.redemption_count,
        checked_in_at: answer.checked_in_at,
      };
      state.tickets.set(ticket.id, counted);
      await state.store.write("tickets", [counted]);
    }
  }
}

/** Puts `scan` at the head of the list; the store keeps as many as the list shows. */
function remember(scan) {
  state.scans = [scan, ...state.scans];
  const dropped = state.scans.splice(LAST_SCANS).map((s) => s.nonce);
  if (dropped.length > 0) state.store.write("scans", [], dropped);
  showScans();
  showStanding();
}

// ---------------------------------------------------------------------------------------------
// Upload: the queue to POST /v1/checkins/batch, oldest first, in chunks

function upload() {
  if (state.uploading || state.keyRefused || state.queue.size === 0 || !navigator.onLine) {
    return state.uploading ?? Promise.resolve();
  }
  state.uploading = (async () => {
    try {
      // Scans queued while a chunk is on its way go in the next one.
      while (state.queue.size > 0 && !state.keyRefused) {
        const chunk = [...state.queue.values()]
          .sort((a, b) => a.scanned_at.localeCompare(b.scanned_at))
          .slice(0, CHUNK);
        const scans = chunk.map(({ ticket_id, ...scan }) => scan);
        const { status, body } = await api("POST", "/v1/checkins/batch", { scans });
        if (status === 400) {
          // The server cannot take a scan of the chunk (it never should): one at a time, so that
          // the one it refuses leaves the queue, noted, and the others go up.
          await uploadEach(chunk);
          continue;
        }
        if (status !== 200) {
          // Kept: tried again on the next round (the same nonces answer the same).
          show($("page-problem"), `The upload failed: ${messageOf(body) ?? `HTTP ${status}`}`);
          return;
        }
        $("page-problem").hidden = true;
        await uploaded(chunk, body.results);
      }
    } catch (error) {
      if (error instanceof KeyRefused) refuseKey(error);
      else if (!(error instanceof Unreachable)) throw error;
    } finally {
      state.uploading = null;
    }
  })();
  return state.uploading;
}

/** The server's answers to a chunk: the scans leave the queue, and the list says how each
 * went; an answer other than the OK the door gave is a conflict, shown in the list. */
async function uploadEach(chunk) {
  for (const { ticket_id, ...scan } of chunk) {
    const { status, body } = await api("POST", "/v1/checkins/batch", { scans: [scan] });
    if (status === 200) {
      await uploaded([scan], body.results);
    } else if (status === 400) {
      const refused = { nonce: scan.nonce, status: `refused by the server: ${messageOf(body) ?? "400"}` };
      await uploaded([scan], [refused]);
    } else {
      return; // kept for the next round
    }
  }
}

async function uploaded(chunk, results) {
  const answers = new Map(results.map((result) => [result.nonce, result]));
  const done = [];
  const shown = [];
  for (const scan of chunk) {
    const answer = answers.get(scan.nonce);
    if (answer === undefined) continue; // not answered: stays queued
    done.push(scan.nonce);
    const queued = state.queue.get(scan.nonce);
    if (queued !== undefined) state.uploadedAt.set(queued.ticket_id, performance.now());
    state.queue.delete(scan.nonce);
    const listed = state.scans.find((s) => s.nonce === scan.nonce);
    if (listed === undefined) continue;
    listed.standing = "uploaded";
    if (answer.status !== "ok") {
      const at = answer.checked_in_at ? ` (${when(answer.checked_in_at)})` : "";
      listed.conflict = `${CONFLICTS[answer.status] ?? `conflict: ${answer.status}`}${at}`;
    }
    shown.push(listed);
  }
  await state.store.write("queue", [], done);
  await state.store.write("scans", shown);
  showScans();
  showStanding();
}

// ---------------------------------------------------------------------------------------------
// The camera: QR codes through BarcodeDetector, where the browser has it and a camera exists

const camera = { stream: null, detector: null, last: "", lastAt: 0 };

async function offerCamera() {
  if (!("BarcodeDetector" in window) || !navigator.mediaDevices?.getUserMedia) return;
  try {
    const formats = await BarcodeDetector.getSupportedFormats();
    const devices = await navigator.mediaDevices.enumerateDevices();
    if (!formats.includes("qr_code") || !devices.some((d) => d.kind === "videoinput")) return;
  } catch {
    return;
  }
  $("camera-box").hidden = false;
}

async function toggleCamera() {
  if (camera.stream !== null) {
    stopCamera();
    return;
  }
  const video = $("preview");
  try {
    camera.stream = await navigator.mediaDevices.getUserMedia({
      video: { facingMode: "environment" },
      audio: false,
    });
  } catch (error) {
    show($("page-problem"), `The camera cannot be used: ${error.message}`);
    return;
  }
  camera.detector = new BarcodeDetector({ formats: ["qr_code"] });
  video.srcObject = camera.stream;
  video.hidden = false;
  await video.play();
  $("camera").textContent = "Stop camera";
  $("camera").setAttribute("aria-pressed", "true");
  lookForCodes();
}

async function lookForCodes() {
  if (camera.stream === null) return;
  try {
    const [code] = await camera.detector.detect($("preview"));
    const text = code?.rawValue?.trim();
    // The same code held in front of the camera is one scan, not one every frame.
    if (text && (text !== camera.last || Date.now() - camera.lastAt > 3000)) {
      camera.last = text;
      camera.lastAt = Date.now();
      decideInTurn(text);
    }
  } catch {
    // A frame that could not be read: the next one may.
  }
  setTimeout(lookForCodes, 150);
}

function stopCamera() {
  if (camera.stream === null) return;
  for (const track of camera.stream.getTracks()) track.stop();
  camera.stream = null;
  $("preview").srcObject = null;
  $("preview").hidden = true;
  $("camera").textContent = "Camera";
  $("camera").setAttribute("aria-pressed", "false");
}

// ---------------------------------------------------------------------------------------------
// Start

async function load(store) {
  state.store = store;
  const saved = {};
  for (const key of ["apiKey", "device", "events", "eventId", "keys", "cursor", "syncedAt"]) {
    saved[key] = await store.get(key);
  }
  state.apiKey = saved.apiKey ?? null;
  state.device = saved.device ?? null;
  state.events = saved.events ?? [];
  state.eventId = saved.eventId ?? null;
  state.cursor = saved.cursor ?? null;
  state.syncedAt = saved.syncedAt ?? null;
  state.syncedKeys = saved.keys ?? [];
  state.keys = new Map(state.syncedKeys.map((k) => [k.kid, base64urlDecode(k.public_key)]));
  state.tickets = new Map((await store.all("tickets")).map((t) => [t.id, t]));
  state.queue = new Map((await store.all("queue")).map((s) => [s.nonce, s]));
  state.scans = (await store.all("scans")).sort((a, b) => b.at.localeCompare(a.at));
  const dropped = state.scans.splice(LAST_SCANS).map((s) => s.nonce);
  if (dropped.length > 0) await store.write("scans", [], dropped);
}

function whenOnline() {
  state.reachable = true; // until a call says otherwise
  showNetwork();
  sync();
  upload();
}

async function start() {
  showNetwork();
  try {
    await load(await Store.open());
  } catch (error) {
    showOnly(null);
    show($("page-problem"), `This browser cannot keep the scanner's data: ${error.message}`);
    return;
  }
  $("sign-in-form").addEventListener("submit", signIn);
  $("pick-form").addEventListener("submit", pickEvent);
  $("scan-form").addEventListener("submit", scanned);
  $("sign-out").addEventListener("click", signOut);
  $("sync-now").addEventListener("click", () => sync());
  $("change-event").addEventListener("click", () => showPick());
  $("camera").addEventListener("click", toggleCamera);
  // A new key keeps everything else: the event, its tickets and the queue.
  $("new-key").addEventListener("click", () => {
    showOnly("sign-in");
    $("api-key").focus();
  });
  window.addEventListener("online", whenOnline);
  window.addEventListener("offline", showNetwork);
  setInterval(upload, UPLOAD_EVERY_MS);
  setInterval(() => navigator.onLine && sync(), SYNC_EVERY_MS);

  if (state.apiKey === null) {
    showOnly("sign-in");
    $("api-key").focus();
  } else if (state.eventId === null) {
    await showPick();
  } else {
    showDoor();
    whenOnline();
  }
  offerCamera();
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/scan/sw.js", { scope: "/scan" }).catch((error) => {
      show($("page-problem"), `The page cannot be kept for offline use: ${error.message}`);
    });
  }
}

start();
