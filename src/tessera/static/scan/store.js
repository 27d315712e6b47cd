// The scanner's memory: one IndexedDB database, kept by the browser across reloads, restarts and
// time offline, until "Sign out" deletes it.
//
//   state    key -> value: the API key, this device's id, the event chosen, the events listed,
//            the sync's cursor and time, the public keys
//   tickets  the event's tickets as the sync gave them (by `id`), with the uses counted here
//   queue    the scans waiting to be uploaded (by `nonce`), in the body's shape plus `ticket_id`
//   scans    the last scans shown (by `nonce`), for the list on the page

const NAME = "tessera-scan";
const VERSION = 1;
const STORES = {
  state: {},
  tickets: { keyPath: "id" },
  queue: { keyPath: "nonce" },
  scans: { keyPath: "nonce" },
};

/** An IDBRequest or IDBTransaction as a promise. */
function done(request) {
  return new Promise((resolve, reject) => {
    if (request instanceof IDBTransaction) {
      request.oncomplete = () => resolve();
      request.onabort = request.onerror = () => reject(request.error);
    } else {
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    }
  });
}

export class Store {
  constructor(db) {
    this.db = db;
  }

  static async open() {
    const request = indexedDB.open(NAME, VERSION);
    request.onupgradeneeded = () => {
      for (const [name, options] of Object.entries(STORES)) {
        if (!request.result.objectStoreNames.contains(name)) {
          request.result.createObjectStore(name, options);
        }
      }
    };
    return new Store(await done(request));
  }

  async get(key) {
    return done(this.db.transaction("state").objectStore("state").get(key));
  }

  /** Writes each key's value of `values` (undefined deletes the key), in one transaction. */
  async set(values) {
    const tx = this.db.transaction("state", "readwrite");
    const state = tx.objectStore("state");
    for (const [key, value] of Object.entries(values)) {
      if (value === undefined) state.delete(key);
      else state.put(value, key);
    }
    return done(tx);
  }

  async all(store) {
    return done(this.db.transaction(store).objectStore(store).getAll());
  }

  /** Puts `records` into `store` and deletes the keys `removed`, in one transaction. */
  async write(store, records, removed = []) {
    const tx = this.db.transaction(store, "readwrite");
    for (const record of records) tx.objectStore(store).put(record);
    for (const key of removed) tx.objectStore(store).delete(key);
    return done(tx);
  }

  /** A scan shown as OK: its ticket's new count, the scan in the queue and in the list, at once,
   * so that no crash can leave a use counted but not queued (or the other way round). */
  async recordOk(ticket, queued, shown) {
    const tx = this.db.transaction(["tickets", "queue", "scans"], "readwrite");
    tx.objectStore("tickets").put(ticket);
    tx.objectStore("queue").put(queued);
    tx.objectStore("scans").put(shown);
    return done(tx);
  }

  async clear(store) {
    const tx = this.db.transaction(store, "readwrite");
    tx.objectStore(store).clear();
    return done(tx);
  }

  /** Forgets everything: the database is gone, and a new one is opened empty. */
  async destroy() {
    this.db.close();
    await done(indexedDB.deleteDatabase(NAME));
    this.db = (await Store.open()).db;
  }
}
