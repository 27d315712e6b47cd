// Reading and judging a ticket's secret at the door, without the server.
//
// A signed secret is base32 (RFC 4648 alphabet, either case, no padding), 143 characters, of
// 89 bytes:
//
//   0x02 | kid (4) | item id (16, the ticket's UUID) | ticket_version (4, big-endian) | signature (64)
//
// the signature being Ed25519's over the first 25 bytes, by the project's check-in key `kid`
// (whose public half the sync hands out). Everything here is pure but for the signature check,
// which uses WebCrypto where the browser has Ed25519 and the vendored @noble/ed25519 elsewhere.

export const FORMAT = 0x02;
export const LENGTH = 143; // characters: base32 of 89 bytes, unpadded
const SIGNED_BYTES = 25; // what the signature covers
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

// The outcomes, as the page says them: the words are the interface (the door staff read them).
export const WORDS = {
  ok: "OK",
  already_checked_in: "ALREADY CHECKED IN",
  revoked: "REVOKED",
  invalid: "INVALID",
  unknown: "UNKNOWN",
  wrong_event: "WRONG EVENT",
};

/** The bytes of base32 `text` (either case, no padding), or null if it is not base32. The bits
 * left over after the last whole byte are ignored, as Python's base64 module (the server) does. */
export function base32Decode(text) {
  const bytes = new Uint8Array(Math.floor((text.length * 5) / 8));
  let buffer = 0;
  let bits = 0;
  let at = 0;
  for (const char of text.toUpperCase()) {
    const value = ALPHABET.indexOf(char);
    if (value < 0) return null;
    buffer = ((buffer << 5) | value) & 0xffff; // at most 12 bits are ever pending
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      bytes[at++] = (buffer >> bits) & 0xff;
    }
  }
  return bytes;
}

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

/** The item's id as the API writes it: 8-4-4-4-12 lowercase hex. */
export function uuidOf(bytes) {
  const h = hex(bytes);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The parts of a signed secret, or null for any other text (a legacy secret, a typo, ...).
 * Read, not verified: that is `verifySignature`'s. */
export function parseSigned(text) {
  if (text.length !== LENGTH) return null;
  const raw = base32Decode(text);
  if (raw === null || raw[0] !== FORMAT) return null;
  return {
    kid: hex(raw.subarray(1, 5)),
    itemId: uuidOf(raw.subarray(5, 21)),
    version: new DataView(raw.buffer, 21, 4).getUint32(0, false),
    signed: raw.slice(0, SIGNED_BYTES),
    signature: raw.slice(SIGNED_BYTES),
  };
}

/** The bytes of base64url text without padding (the sync's public keys). */
export function base64urlDecode(text) {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

// How signatures are checked, found out once: WebCrypto's Ed25519 (Chrome 137+, Firefox 129+,
// Safari 17+), else the vendored library, loaded only then.
let verifier = null;
// A valid public key (RFC 8032's first test vector), to ask WebCrypto whether it knows Ed25519.
const PROBE_KEY = Uint8Array.from(
  "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a".match(/../g),
  (pair) => parseInt(pair, 16),
);

async function webCryptoHasEd25519() {
  try {
    // A key that imports says the algorithm is there; one that does not, that it is not.
    await crypto.subtle.importKey("raw", PROBE_KEY, { name: "Ed25519" }, false, ["verify"]);
    return true;
  } catch {
    return false;
  }
}

/** The function that checks a signature: `(publicKey, signature, message) => Promise<bool>`.
 * `force` ("webcrypto" or "noble") picks one, for the tests. */
export async function signatureChecker(force = null) {
  if (force === null && verifier !== null) return verifier;
  const useWebCrypto = force === null ? await webCryptoHasEd25519() : force === "webcrypto";
  let check;
  if (useWebCrypto) {
    const imported = new Map(); // public key (hex) -> CryptoKey: import each key once
    check = async (publicKey, signature, message) => {
      const id = hex(publicKey);
      if (!imported.has(id)) {
        imported.set(
          id,
          await crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]),
        );
      }
      return crypto.subtle.verify({ name: "Ed25519" }, imported.get(id), signature, message);
    };
  } else {
    const ed = await import("./vendor/ed25519.js");
    // RFC 8032's strict rules, as the server's (OpenSSL) check: never accept what it refuses.
    check = (publicKey, signature, message) =>
      ed.verifyAsync(signature, message, publicKey, { zip215: false }).catch(() => false);
  }
  if (force === null) verifier = check;
  return check;
}

/** Whether the secret's signature is that of the 32-byte Ed25519 key `publicKey`. A key that
 * does not import (not a point of the curve) verifies nothing. */
export async function verifySignature(publicKey, secret, force = null) {
  const check = await signatureChecker(force);
  try {
    return await check(publicKey, secret.signature, secret.signed);
  } catch {
    return false;
  }
}

/**
 * What the door says of a signed secret, from what the sync left: `keys` (kid -> public key
 * bytes) and `tickets` (id -> ticket as the sync gives it, with the local use count).
 * Returns `{outcome, ticket?}`; null when `text` is not a signed secret at all (the server's
 * to judge, if it can be reached). The order is the one the server follows: who signed it,
 * whether the signature holds, whether the ticket is this event's, whether it is the ticket's
 * current secret, whether a use is left.
 */
export async function judge(text, keys, tickets) {
  const secret = parseSigned(text);
  if (secret === null) return null;
  const publicKey = keys.get(secret.kid);
  if (publicKey === undefined) return { outcome: "unknown", secret };
  if (!(await verifySignature(publicKey, secret))) return { outcome: "invalid", secret };
  const ticket = tickets.get(secret.itemId);
  if (ticket === undefined) return { outcome: "wrong_event", secret };
  if (secret.version < ticket.ticket_version) return { outcome: "revoked", secret, ticket };
  if (ticket.redemption_count >= ticket.redemption_quantity) {
    return { outcome: "already_checked_in", secret, ticket };
  }
  return { outcome: "ok", secret, ticket };
}
