// wsikit view: the page script. OpenSeadragon shows slide.dzi; heatmap layers are tiled images
// over it; tissue, artefacts and regions are drawn in an SVG overlay that the "Regions" and
// "Tissue" modes edit. Saves go to edit/regions and edit/tissue with the version of the file
// the page loaded (a file changed on disk since is refused by the server, never overwritten).
// Text from files is set with textContent only. Every data request carries the page's token.
"use strict";
(function () {
  var OSD = window.OpenSeadragon;
  var token = new URLSearchParams(location.search).get("token") || "";
  var SVGNS = "http://www.w3.org/2000/svg";
  function u(path, extra) { return path + "?token=" + encodeURIComponent(token) + (extra || ""); }
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs, parent) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(e);
    return e;
  }
  function getJSON(path) {
    return fetch(u(path)).then(function (r) {
      if (!r.ok) return r.text().then(function (t) { throw new Error(t || r.statusText); });
      return r.json();
    });
  }

  var info = null, viewer = null, overlay = null, world = null, screen = null;
  var S = {
    mode: "pan", regions: [], tissue: [], artefacts: [], selected: null, undo: [],
    versions: {regions: null, tissue: null}, dirty: {regions: false, tissue: false},
    editable: {regions: false, tissue: false}, layers: {}, changed: null,
    tilesLoaded: 0, tilesFailed: 0, levels: {}
  };
  // what tests and scripts can read (the page's state, not a way to change it)
  window.wsikitView = {
    state: function () {
      return {mode: S.mode, regions: S.regions, tissue: S.tissue.length, dirty: S.dirty,
              versions: S.versions, changed: S.changed, tilesLoaded: S.tilesLoaded,
              tilesFailed: S.tilesFailed, levels: S.levels, selected: S.selected,
              layers: Object.keys(S.layers).filter(function (k) { return S.layers[k].item; }),
              message: $("message").textContent,
              banner: $("banner").hidden ? null : $("banner").textContent};
    },
    toScreen: function (x, y) { return toScreen(x, y); },
    viewer: function () { return viewer; }
  };

  function say(text) { $("message").textContent = text || ""; }
  function banner(text) {
    var b = $("banner");
    b.hidden = !text;
    b.textContent = text || "";
  }

  // -- coordinates ---------------------------------------------------------------------------
  function toScreen(x, y) {
    var p = viewer.viewport.imageToViewerElementCoordinates(new OSD.Point(x, y));
    return [p.x, p.y];
  }
  function toImage(evt) {
    var rect = viewer.element.getBoundingClientRect();
    var p = viewer.viewport.viewerElementToImageCoordinates(
      new OSD.Point(evt.clientX - rect.left, evt.clientY - rect.top));
    return [p.x, p.y];
  }
  function clampBox(b) {
    var x0 = Math.max(0, Math.min(info.width, b.x)), y0 = Math.max(0, Math.min(info.height, b.y));
    var x1 = Math.max(0, Math.min(info.width, b.x + b.width));
    var y1 = Math.max(0, Math.min(info.height, b.y + b.height));
    return {x: Math.round(x0), y: Math.round(y0), width: Math.round(x1 - x0),
            height: Math.round(y1 - y0)};
  }

  // -- the overlay ---------------------------------------------------------------------------
  function place() {
    if (!viewer || !world) return;
    var p0 = toScreen(0, 0), p1 = toScreen(1000, 0), s = (p1[0] - p0[0]) / 1000;
    world.setAttribute("transform", "translate(" + p0[0] + "," + p0[1] + ") scale(" + s + ")");
    drawScreen();
    var z = viewer.viewport.viewportToImageZoom(viewer.viewport.getZoom(true));
    $("zoom").textContent = z >= 1 ? "1:1+" : "1:" + Math.round(1 / z);
  }
  function ringPath(rings) {
    return rings.map(function (ring) {
      return "M" + ring.map(function (p) { return p[0] + " " + p[1]; }).join("L") + "Z";
    }).join("");
  }
  function colourOf(scale) {
    var known = {8: "#2563eb", 4: "#16a34a", 2: "#ea580c", 1: "#db2777"};
    return known[scale] || ["#7c3aed", "#0891b2", "#ca8a04", "#4b5563"][scale % 4];
  }
  function draw() {
    if (!world) return;
    while (world.firstChild) world.removeChild(world.firstChild);
    var editing = S.mode !== "pan";
    if ($("show-artefacts").checked) {
      S.artefacts.forEach(function (a) {
        svg("path", {d: ringPath(a.rings), "class": "artefact", stroke: a.colour,
                     fill: a.colour, "fill-opacity": 0.25, "vector-effect": "non-scaling-stroke"},
            world);
      });
    }
    if ($("show-tissue").checked || S.mode === "tissue") {
      S.tissue.forEach(function (f, i) {
        var sel = S.selected && S.selected.kind === "tissue" && S.selected.index === i;
        var p = svg("path", {d: ringPath(f.rings), "class": "tissue" + (sel ? " selected" : ""),
                             "vector-effect": "non-scaling-stroke", "fill-rule": "evenodd"}, world);
        p.dataset.tissue = String(i);
        if (S.mode === "tissue") p.style.pointerEvents = "all";
      });
    }
    if ($("show-regions").checked || S.mode === "regions") {
      S.regions.slice().reverse().forEach(function (r) {
        var sel = S.selected && S.selected.kind === "region" && S.selected.id === r.id;
        var e = svg("rect", {x: r.box.x, y: r.box.y, width: r.box.width, height: r.box.height,
                             "class": "region" + (sel ? " selected" : ""), stroke: colourOf(r.scale),
                             "vector-effect": "non-scaling-stroke"}, world);
        e.dataset.region = r.id;
        if (S.mode === "regions") e.style.pointerEvents = "all";
      });
    }
    overlay.classList.toggle("editing", editing);
    world.classList.toggle("editing-regions", S.mode === "regions");
    drawScreen();
  }
  function drawScreen() {  // labels and vertex handles: fixed size on screen
    if (!screen) return;
    while (screen.firstChild) screen.removeChild(screen.firstChild);
    if ($("show-regions").checked || S.mode === "regions") {
      var corners = {};  // regions sharing a corner (nested windows): labels side by side
      S.regions.forEach(function (r) {
        var p = toScreen(r.box.x, r.box.y), key = r.box.x + "," + r.box.y;
        var shift = corners[key] || 0, label = r.id + " " + r.scale + "x";
        var t = svg("text", {x: p[0] + 3 + shift, y: p[1] - 4, stroke: colourOf(r.scale)}, screen);
        t.textContent = label;
        corners[key] = shift + 8 * label.length + 6;
      });
    }
    if (S.mode === "tissue" && S.selected && S.selected.kind === "tissue") {
      var f = S.tissue[S.selected.index];
      if (!f) return;
      var n = f.rings.reduce(function (a, r) { return a + r.length; }, 0);
      if (n > 4000) { say("this outline has " + n + " vertices: zoom in to edit a part of it"); }
      var W = viewer.element.clientWidth, H = viewer.element.clientHeight, shown = 0;
      f.rings.forEach(function (ring, k) {
        ring.forEach(function (pt, i) {
          if (shown > 4000) return;
          var p = toScreen(pt[0], pt[1]);
          if (p[0] < -10 || p[1] < -10 || p[0] > W + 10 || p[1] > H + 10) return;
          shown++;
          var h = svg("circle", {cx: p[0], cy: p[1], r: 5, "class": "handle"}, screen);
          h.dataset.ring = String(k); h.dataset.vertex = String(i);
          h.style.pointerEvents = "all";
          var nx = ring[(i + 1) % ring.length], q = toScreen((pt[0] + nx[0]) / 2, (pt[1] + nx[1]) / 2);
          var m = svg("circle", {cx: q[0], cy: q[1], r: 4, "class": "handle mid"}, screen);
          m.dataset.ring = String(k); m.dataset.after = String(i);
          m.style.pointerEvents = "all";
        });
      });
    }
  }

  // -- edits ---------------------------------------------------------------------------------
  function snapshot() {
    S.undo.push(JSON.stringify({regions: S.regions, tissue: S.tissue, dirty: S.dirty}));
    if (S.undo.length > 200) S.undo.shift();
    $("undo").disabled = false;
  }
  function changed(kind) {
    S.dirty[kind] = true;
    buttons();
  }
  function buttons() {
    var dirty = S.dirty.regions || S.dirty.tissue;
    $("save").disabled = !dirty;
    $("download").disabled = !dirty;
    $("undo").disabled = !S.undo.length;
    $("delete").disabled = !S.selected;
    $("mode-regions").disabled = !S.editable.regions;
    $("mode-tissue").disabled = !S.editable.tissue;
  }
  function undo() {
    var last = S.undo.pop();
    if (!last) return;
    var s = JSON.parse(last);
    S.regions = s.regions; S.tissue = s.tissue; S.dirty = s.dirty; S.selected = null;
    draw(); buttons(); say("undone");
  }
  function remove() {
    if (!S.selected) return;
    snapshot();
    if (S.selected.kind === "region") {
      S.regions = S.regions.filter(function (r) { return r.id !== S.selected.id; });
      changed("regions");
    } else {
      S.tissue.splice(S.selected.index, 1);
      changed("tissue");
    }
    S.selected = null;
    draw(); buttons();
  }
  function newRegionId() {
    var n = 1, ids = {};
    S.regions.forEach(function (r) { ids[r.id] = true; });
    while (ids["u" + n]) n++;
    return "u" + n;
  }
  function setMode(mode) {
    S.mode = mode; S.selected = null;
    ["pan", "regions", "tissue"].forEach(function (m) {
      $("mode-" + m).classList.toggle("active", m === mode); });
    viewer.setMouseNavEnabled(mode === "pan");
    say(mode === "regions" ? "drag on the slide to draw a region; drag a region to move it; " +
        "the wheel zooms" : mode === "tissue" ? "click an outline to edit its vertices" : "");
    draw(); buttons();
  }

  var drag = null;
  function onDown(evt) {
    if (S.mode === "pan" || evt.button !== 0) return;
    var t = evt.target, p = toImage(evt);
    evt.preventDefault(); evt.stopPropagation();
    if (S.mode === "regions") {
      if (t.dataset && t.dataset.region) {
        var r = S.regions.filter(function (x) { return x.id === t.dataset.region; })[0];
        S.selected = {kind: "region", id: r.id};
        snapshot();
        drag = {kind: "move", region: r, start: p, box: Object.assign({}, r.box), moved: false};
      } else {
        snapshot();
        var nr = {id: newRegionId(), rank: S.regions.length + 1, scale: 1, score: 0,
                  drawn: true, box: {x: p[0], y: p[1], width: 0, height: 0}};
        S.regions.push(nr);
        S.selected = {kind: "region", id: nr.id};
        drag = {kind: "draw", region: nr, start: p};
      }
    } else if (S.mode === "tissue") {
      if (t.dataset && t.dataset.vertex !== undefined && S.selected) {
        snapshot();
        drag = {kind: "vertex", ring: +t.dataset.ring, vertex: +t.dataset.vertex, moved: false};
      } else if (t.dataset && t.dataset.after !== undefined && S.selected) {
        snapshot();
        var ring = S.tissue[S.selected.index].rings[+t.dataset.ring], at = +t.dataset.after + 1;
        ring.splice(at, 0, [p[0], p[1]]);
        changed("tissue");
        drag = {kind: "vertex", ring: +t.dataset.ring, vertex: at, moved: true};
      } else if (t.dataset && t.dataset.tissue !== undefined) {
        S.selected = {kind: "tissue", index: +t.dataset.tissue};
      } else {
        S.selected = null;
      }
    }
    overlay.setPointerCapture(evt.pointerId);
    draw(); buttons();
  }
  function onMove(evt) {
    if (!drag) return;
    var p = toImage(evt);
    if (drag.kind === "draw") {
      var x0 = Math.min(drag.start[0], p[0]), y0 = Math.min(drag.start[1], p[1]);
      drag.region.box = clampBox({x: x0, y: y0, width: Math.abs(p[0] - drag.start[0]),
                                  height: Math.abs(p[1] - drag.start[1])});
    } else if (drag.kind === "move") {
      var dx = p[0] - drag.start[0], dy = p[1] - drag.start[1];
      var b = drag.box;
      var nx = Math.max(0, Math.min(info.width - b.width, b.x + dx));
      var ny = Math.max(0, Math.min(info.height - b.height, b.y + dy));
      drag.region.box = {x: Math.round(nx), y: Math.round(ny), width: b.width, height: b.height};
      drag.moved = drag.moved || Math.abs(dx) + Math.abs(dy) > 0;
    } else if (drag.kind === "vertex") {
      var ring = S.tissue[S.selected.index].rings[drag.ring];
      ring[drag.vertex] = [Math.max(0, Math.min(info.width, p[0])),
                           Math.max(0, Math.min(info.height, p[1]))];
      drag.moved = true;
    }
    draw();
  }
  function onUp() {
    if (!drag) return;
    var d = drag;
    drag = null;
    if (d.kind === "draw") {
      if (d.region.box.width < 4 || d.region.box.height < 4) {  // a click: no region
        S.regions.pop(); S.undo.pop(); S.selected = null;
      } else {
        changed("regions"); say("region " + d.region.id + " drawn");
      }
    } else if (d.kind === "move") {
      if (d.moved) {  // its recorded tissue fraction was of the old box
        delete d.region.usable_tissue;
        changed("regions");
      } else S.undo.pop();
    } else if (d.kind === "vertex") {
      if (d.moved) changed("tissue"); else S.undo.pop();
    }
    draw(); buttons();
  }
  function onDouble(evt) {
    var t = evt.target;
    if (S.mode !== "tissue" || !S.selected || !t.dataset || t.dataset.vertex === undefined) return;
    var ring = S.tissue[S.selected.index].rings[+t.dataset.ring];
    if (ring.length <= 3) { say("an outline needs at least 3 vertices"); return; }
    snapshot();
    ring.splice(+t.dataset.vertex, 1);
    changed("tissue"); draw(); buttons();
  }
  function onWheel(evt) {  // the editing modes keep wheel zoom
    if (S.mode === "pan") return;
    evt.preventDefault();
    var rect = viewer.element.getBoundingClientRect();
    var at = viewer.viewport.pointFromPixel(new OSD.Point(evt.clientX - rect.left,
                                                          evt.clientY - rect.top));
    viewer.viewport.zoomBy(Math.exp(-evt.deltaY * 0.0015), at);
    viewer.viewport.applyConstraints();
  }

  function payload(kind) {
    if (kind === "regions") {
      return {version: S.versions.regions, regions: S.regions.map(function (r) {
        var o = {id: r.id, rank: r.rank, scale: r.scale, score: r.score, box: r.box};
        if (r.usable_tissue !== undefined) o.usable_tissue = r.usable_tissue;
        return o; })};
    }
    return {version: S.versions.tissue, features: S.tissue.map(function (f) {
      return {rings: f.rings, from: f.from}; })};
  }
  function save() {
    var kinds = ["regions", "tissue"].filter(function (k) { return S.dirty[k]; });
    var chain = Promise.resolve();
    kinds.forEach(function (kind) {
      chain = chain.then(function () {
        return fetch(u("edit/" + kind), {method: "POST", body: JSON.stringify(payload(kind)),
                                         headers: {"Content-Type": "application/json"}})
          .then(function (r) {
            return r.text().then(function (t) {
              if (!r.ok) throw new Error(t);
              var d = JSON.parse(t);
              S.versions[kind] = d.version; S.dirty[kind] = false;
              say(kind + " saved");
              document.body.dataset.saved = (document.body.dataset.saved || "") + kind + " ";
            });
          });
      });
    });
    chain.then(function () { buttons(); banner(null); }).catch(function (e) {
      banner("Not saved: " + e.message);
      document.body.dataset.refused = "1";
      buttons();
    });
  }
  function download() {
    var doc = {regions: payload("regions"), tissue: payload("tissue")};
    var a = el("a");
    a.href = URL.createObjectURL(new Blob([JSON.stringify(doc)], {type: "application/json"}));
    a.download = info.name + "-edits.json";
    document.body.appendChild(a); a.click(); a.remove();
  }

  // -- heatmap layers ------------------------------------------------------------------------
  // one OpenSeadragon tiled image per layer shown (PNG tiles with alpha over the slide's
  // Deep Zoom grid); opacity is the tiled image's, threshold and palette are drawn by the
  // server (the tiled image is replaced when they change)
  function layerQuery(st) {
    return "&palette=" + encodeURIComponent(st.palette) +
      (st.threshold !== null ? "&threshold=" + encodeURIComponent(st.threshold) : "");
  }
  function layerSource(id, st) {
    var extra = layerQuery(st);
    return {width: info.width, height: info.height, tileSize: info.tile, tileOverlap: 0,
            minLevel: 0, maxLevel: info.max_level,
            getTileUrl: function (level, x, y) {
              return u("layer_files/" + id + "/" + level + "/" + x + "_" + y + ".png", extra); }};
  }
  function shownLayers() {
    return Object.keys(S.layers).filter(function (k) { return S.layers[k].item; });
  }
  function showLayer(id) {
    var st = S.layers[id];
    if (st.item) { viewer.world.removeItem(st.item); st.item = null; }
    document.body.dataset.layers = shownLayers().join(",");
    if (!st.on || S.changed) return;
    var want = layerQuery(st);
    viewer.addTiledImage({tileSource: layerSource(id, st), opacity: st.opacity,
                          success: function (e) {
                            if (!st.on || layerQuery(st) !== want) {  // changed meanwhile
                              viewer.world.removeItem(e.item); return; }
                            if (st.item) viewer.world.removeItem(st.item);
                            st.item = e.item;
                            document.body.dataset.layers = shownLayers().join(",");
                          }});
  }
  function layerControls(layer) {
    var id = layer.id, lo = layer.value_range[0], hi = layer.value_range[1];
    var st = S.layers[id] = {on: false, opacity: 0.6, threshold: null, palette: "viridis",
                             item: null, name: layer.name};
    var box = el("div", "layer"); box.dataset.layer = id;
    var head = el("label"), cb = el("input"); cb.type = "checkbox"; cb.dataset.layer = id;
    head.appendChild(cb); head.appendChild(document.createTextNode(" " + layer.name));
    box.appendChild(head);
    box.appendChild(el("div", "muted", layer.source));
    function row(label, input) {
      var r = el("div", "row"); r.appendChild(el("span", null, label)); r.appendChild(input);
      box.appendChild(r); return input;
    }
    var op = el("input"); op.type = "range"; op.min = 0; op.max = 1; op.step = 0.05;
    op.value = st.opacity; op.dataset.role = "opacity";
    row("opacity", op);
    var th = el("input"); th.type = "range"; th.min = lo; th.max = hi; th.step = (hi - lo) / 100;
    th.value = lo; th.dataset.role = "threshold";
    var thv = el("span", "val", "off");
    row("threshold", th); box.lastChild.appendChild(thv);
    var pal = el("select"); pal.dataset.role = "palette";
    (info.palettes || ["viridis"]).forEach(function (p) {
      var o = el("option", null, p); o.value = p; pal.appendChild(o); });
    row("palette", pal);
    var legend = el("img", "legend"); legend.alt = "legend: " + layer.label;
    function legendSrc() { legend.src = u("layer_legend/" + id + ".svg", layerQuery(st)); }
    legendSrc();
    box.appendChild(legend);
    cb.addEventListener("change", function () { st.on = cb.checked; showLayer(id); });
    op.addEventListener("input", function () {
      st.opacity = +op.value; if (st.item) st.item.setOpacity(st.opacity); });
    var timer = null;
    th.addEventListener("input", function () {
      st.threshold = +th.value > lo ? +th.value : null;
      thv.textContent = st.threshold === null ? "off" : "≥ " + Number(st.threshold).toPrecision(3);
      clearTimeout(timer);
      timer = setTimeout(function () { legendSrc(); showLayer(id); }, 250); });
    pal.addEventListener("change", function () {
      st.palette = pal.value; legendSrc(); showLayer(id); });
    $("heat-list").appendChild(box);
  }

  // -- the slide changed on disk -------------------------------------------------------------
  function checkStatus() {
    return getJSON("status.json").then(function (s) {
      if (s.changed && !S.changed) {
        S.changed = s.changed;
        viewer.world.removeAll();
        Object.keys(S.layers).forEach(function (k) { S.layers[k].item = null; });
        banner("The slide is no longer shown: " + s.changed);
        document.body.dataset.changed = "1";
      }
    }).catch(function () {});
  }

  // -- cards ---------------------------------------------------------------------------------
  function flyTo(r) {
    document.querySelectorAll(".card").forEach(function (c) {
      c.classList.toggle("active", c.dataset.id === r.id); });
    var pad = 0.15;
    var rect = viewer.viewport.imageToViewportRectangle(
      r.box.x - r.box.width * pad, r.box.y - r.box.height * pad,
      r.box.width * (1 + 2 * pad), r.box.height * (1 + 2 * pad));
    viewer.viewport.fitBounds(rect);
    var done = function () {
      viewer.removeHandler("animation-finish", done);
      document.body.dataset.view = r.id;
    };
    viewer.addHandler("animation-finish", done);
  }
  function card(r) {
    var c = el("div", "card"); c.dataset.id = r.id;
    var h = el("h2"); var sw = el("span", "swatch"); sw.style.background = r.colour;
    h.appendChild(sw);
    h.appendChild(document.createTextNode(r.id + " · " + r.scale + "x · score " +
      Number(r.score).toFixed(3) + (r.inside ? " · inside " + r.inside : "")));
    c.appendChild(h);
    if (r.crop) { var img = el("img", "crop"); img.src = u(r.crop); img.alt = "crop of region " + r.id; c.appendChild(img); }
    c.appendChild(el("div", "muted", "level-0 box x " + r.box.x + ", y " + r.box.y + ", " +
                     r.box.width + " × " + r.box.height + " px"));
    if (!r.matches.length) c.appendChild(el("div", "muted", "no matched figure"));
    r.matches.forEach(function (m) {
      var row = el("div", "match"), fig = el("img"); fig.src = u(m.image);
      fig.alt = "matched figure"; row.appendChild(fig);
      var t = el("div");
      t.appendChild(el("b", null, (m.figure_label || "Figure") + " "));
      t.appendChild(el("span", null, m.caption || ""));
      var pct = m.similarity_percentile == null ? "" : ", above " + m.similarity_percentile + "% of unrelated figures";
      t.appendChild(el("div", "muted", "similarity " + Number(m.similarity).toFixed(3) + pct));
      t.appendChild(el("div", "muted", (m.source_title || "") + (m.year ? " (" + m.year + ")" : "")));
      if (m.doi) t.appendChild(el("div", "muted", "DOI " + m.doi));
      if (m.evidence_level_name || m.evidence_level)
        t.appendChild(el("div", "muted", "evidence: " + (m.evidence_level_name || m.evidence_level)));
      row.appendChild(t); c.appendChild(row);
    });
    c.addEventListener("click", function () { flyTo(r); });
    return c;
  }

  function rings(geom) {
    if (!geom) return [];
    if (geom.type === "Polygon") return geom.coordinates;
    if (geom.type === "MultiPolygon") return [].concat.apply([], geom.coordinates);
    return [];
  }

  // -- start ---------------------------------------------------------------------------------
  function start(d) {
    info = d;
    document.title = "wsikit view · " + info.name;
    $("title").textContent = info.name + " (" + info.width + " × " + info.height + " px" +
      (info.mpp ? ", " + info.mpp.toPrecision(3) + " µm/px" : "") + ")";
    if (info.cohort) { $("back").hidden = false; $("back-link").href = u("../../"); }
    var cards = $("cards");
    if (info.synthetic) cards.appendChild(el("div", "banner", "Synthetic demo data."));
    (info.problems || []).forEach(function (p) { cards.appendChild(el("div", "banner", p)); });
    if (!info.regions.length) cards.appendChild(el("div", "muted", "No regions: pass a wsikit select result folder to see them."));
    info.regions.forEach(function (r) { cards.appendChild(card(r)); });
    S.editable = info.editable || {};
    if (info.changed) {
      S.changed = info.changed;
      banner("The slide is not shown: " + info.changed);
      document.body.dataset.changed = "1";
    }
    viewer = OSD({
      element: $("osd"), tileSources: S.changed ? [] : [u("slide.dzi")], showNavigationControl: false,
      showNavigator: true, navigatorPosition: "BOTTOM_RIGHT", drawer: "canvas",
      maxZoomPixelRatio: 4, visibilityRatio: 0.5, animationTime: 0.6, imageLoaderLimit: 6,
      gestureSettingsMouse: {clickToZoom: false, dblClickToZoom: true}
    });
    // the navigator mirrors each tiled image once its copy has loaded: a layer removed before
    // that (switched off, or redrawn with another palette at once) would stay there, drawn
    // over the overview, with no original left to remove it
    if (viewer.navigator) viewer.navigator.world.addHandler("add-item", function (e) {
      setTimeout(function () {
        var original = e.item._originalForNavigator;
        if (original && viewer.world.getIndexOfItem(original) === -1)
          viewer.navigator.world.removeItem(e.item);
      }, 0);
    });
    viewer.addHandler("tile-loaded", function (e) {
      S.tilesLoaded++;
      var lv = e.tile.level;
      S.levels[lv] = (S.levels[lv] || 0) + 1;
    });
    viewer.addHandler("tile-load-failed", function () { S.tilesFailed++; checkStatus(); });
    overlay = svg("svg", {"class": "wsikit-overlay"});
    world = svg("g", {}, overlay);
    screen = svg("g", {}, overlay);
    viewer.canvas.appendChild(overlay);
    overlay.addEventListener("pointerdown", onDown);
    overlay.addEventListener("pointermove", onMove);
    overlay.addEventListener("pointerup", onUp);
    overlay.addEventListener("pointercancel", onUp);
    overlay.addEventListener("dblclick", onDouble);
    overlay.addEventListener("wheel", onWheel, {passive: false});
    ["update-viewport", "animation", "resize", "open"].forEach(function (k) {
      viewer.addHandler(k, place); });
    viewer.addHandler("open", function () { document.body.dataset.ready = "1"; });
    $("home").onclick = function () { viewer.viewport.goHome(); };
    $("zoom-in").onclick = function () { viewer.viewport.zoomBy(1.6); };
    $("zoom-out").onclick = function () { viewer.viewport.zoomBy(1 / 1.6); };
    ["pan", "regions", "tissue"].forEach(function (m) {
      $("mode-" + m).onclick = function () { setMode(m); }; });
    $("delete").onclick = remove;
    $("undo").onclick = undo;
    $("save").onclick = save;
    $("download").onclick = download;
    ["show-regions", "show-tissue", "show-artefacts"].forEach(function (id) {
      $(id).addEventListener("change", draw); });
    document.addEventListener("keydown", function (e) {
      if (e.target && e.target.tagName === "INPUT") return;
      if ((e.ctrlKey || e.metaKey) && e.key === "z") { e.preventDefault(); undo(); }
      else if ((e.key === "Delete" || e.key === "Backspace") && S.selected) { e.preventDefault(); remove(); }
      else if (e.key === "Escape") setMode("pan");
    });
    window.addEventListener("beforeunload", function (e) {
      if (S.dirty.regions || S.dirty.tissue) { e.preventDefault(); e.returnValue = ""; }
    });
    (info.layers || []).forEach(layerControls);
    if (!(info.layers || []).length) $("heat-list").appendChild(el("div", "muted", "No heatmap layers."));
    var loads = [];
    if (info.has_artefacts) loads.push(getJSON("overlay/artefacts.json").then(function (g) {
      S.artefacts = ((g && g.features) || []).map(function (f) {
        var c = (f.properties && f.properties.classification && f.properties.classification.color) || [120, 120, 120];
        return {colour: "rgb(" + c.slice(0, 3).map(Number).join(",") + ")", rings: rings(f.geometry)};
      });
    }));
    loads.push(getJSON("overlay/regions.json").then(function (d) {
      S.versions.regions = d.version;
      if (d.problem) cards.insertBefore(el("div", "banner", d.problem), cards.firstChild);
      S.regions = (d.regions || info.regions).map(function (r) {
        return {id: r.id, rank: r.rank, scale: r.scale, score: r.score, box: r.box,
                usable_tissue: r.usable_tissue}; });
      if (!d.editable) S.regions = info.regions.map(function (r) {
        return {id: r.id, rank: r.rank, scale: r.scale, score: r.score, box: r.box}; });
    }));
    loads.push(getJSON("overlay/tissue-edit.json").then(function (d) {
      S.versions.tissue = d.version;
      if (d.problem) cards.insertBefore(el("div", "banner", d.problem), cards.firstChild);
      S.tissue = (d.features || []).map(function (f) {
        return {from: f.from, rings: rings(f.geometry)}; });
    }));
    if (!S.editable.tissue && info.has_tissue) loads.push(getJSON("overlay/tissue.json").then(function (g) {
      S.tissue = ((g && g.features) || []).map(function (f) { return {from: f.from, rings: rings(f.geometry)}; });
    }));
    Promise.all(loads).then(function () {
      draw(); buttons();
      document.body.dataset.overlays = "1";
      var wanted = location.hash.slice(1);
      var r = info.regions.filter(function (x) { return x.id === wanted; })[0];
      if (r) {
        if (viewer.world.getItemCount()) flyTo(r);
        else viewer.addOnceHandler("open", function () { flyTo(r); });
      }
    }).catch(function (e) { banner("Cannot load the overlays: " + e.message); });
    setInterval(checkStatus, 4000);
    buttons();
  }
  getJSON("info.json").then(start).catch(function (e) { banner("Cannot load the slide: " + e.message); });
})();
