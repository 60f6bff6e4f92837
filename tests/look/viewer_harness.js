// Runs wsikit's viewer page script in Node with a minimal DOM: fetch and tile images go to
// the real `wsikit view` server given as argv[3] (its URL with ?token=...); argv[4] is the
// page's location hash.
// Prints JSON: the body's data attributes, the card ids, the tile URLs loaded.
"use strict";
const fs = require("fs");
const [page, url, hash] = [process.argv[2], process.argv[3], process.argv[4] || ""];
const base = new URL(url).origin, search = new URL(url).search;
const html = fs.readFileSync(page, "utf8");
const script = html.match(/<script>([\s\S]*)<\/script>/)[1];
const loaded = [];
function node(tag) {
  return {tag, children: [], dataset: {}, style: {}, className: "", textContent: "",
    classList: {toggle() {}}, listeners: {},
    appendChild(c) { this.children.push(c); return c; },
    addEventListener(k, f) { this.listeners[k] = f; }};
}
const ctx = new Proxy({measureText: () => ({width: 40})}, {
  get: (t, k) => (k in t ? t[k] : () => {}), set: () => true});
const canvas = Object.assign(node("canvas"), {clientWidth: 1000, clientHeight: 800,
  getContext: () => ctx, getBoundingClientRect: () => ({left: 0, top: 0})});
const ids = {view: canvas, cards: node("div"), title: node("h1"), zoom: node("span")};
for (const id of ["show-regions", "show-tissue", "show-artefacts", "show-heatmap"]) ids[id] = {checked: true,
  addEventListener() {}};
const body = node("body");
global.document = {
  getElementById: (id) => ids[id], createElement: node, body,
  createTextNode: (t) => ({textContent: t}), querySelectorAll: () => [], title: ""};
global.window = {addEventListener() {}};
global.location = {hash, search};
global.requestAnimationFrame = (f) => setTimeout(() => f(Date.now()), 5);
global.cancelAnimationFrame = (h) => clearTimeout(h);
const realFetch = fetch;
global.fetch = (u) => realFetch(base + u);
global.Image = class {
  set src(u) {
    this._src = u;
    realFetch(base + u).then((r) => { if (r.ok) { loaded.push(u.split("?")[0]); this.naturalWidth = 256;
      this.naturalHeight = 256; this.complete = true; if (this.onload) this.onload(); } });
  }
  get src() { return this._src; }
};
new Function(script)();
setTimeout(() => {
  process.stdout.write(JSON.stringify({data: body.dataset, title: document.title,
    cards: ids.cards.children.map((c) => c.dataset.id || c.textContent), tiles: loaded}));
}, Number(process.argv[5] || 3000));
