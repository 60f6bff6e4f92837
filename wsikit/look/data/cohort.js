// wsikit view of an output folder: the table of slides (cohort.json), each opening the viewer
// at slides/<name>/. Text is set with textContent only; every request carries the token.
"use strict";
(function () {
  var token = new URLSearchParams(location.search).get("token") || "";
  function u(path) { return path + "?token=" + encodeURIComponent(token); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function pct(v, warnAbove) {
    var td = el("td", "num", v === null || v === undefined ? "–" : (100 * v).toFixed(1) + " %");
    if (v !== null && v !== undefined && warnAbove !== undefined && v > warnAbove) td.classList.add("warn");
    return td;
  }
  fetch(u("cohort.json")).then(function (r) { return r.json(); }).then(function (d) {
    document.getElementById("title").textContent = "wsikit view · " + d.root;
    var counts = {};
    d.slides.forEach(function (s) { counts[s.status] = (counts[s.status] || 0) + 1; });
    document.getElementById("summary").textContent = d.slides.length + " slides: " +
      Object.keys(counts).map(function (k) { return counts[k] + " " + k; }).join(", ") +
      ". Ink, folds and debris are fractions of the tissue; flagged above 5 %.";
    var tbody = document.getElementById("rows");
    d.slides.forEach(function (s) {
      var tr = el("tr"); tr.dataset.slide = s.name;
      var td = el("td");
      if (s.has_thumbnail) {
        var img = el("img", "thumb"); img.alt = "thumbnail of " + s.name;
        img.src = u("thumb/" + encodeURIComponent(s.name) + ".png"); td.appendChild(img);
      } else td.appendChild(el("span", "muted", "no thumbnail"));
      tr.appendChild(td);
      tr.appendChild(el("td", null, s.name));
      var st = el("td"); st.appendChild(el("span", "status " + s.status, s.status));
      if (s.error) st.appendChild(el("div", "err", s.error));
      tr.appendChild(st);
      tr.appendChild(pct(s.qc.tissue));
      tr.appendChild(pct(s.qc.ink, 0.05));
      tr.appendChild(pct(s.qc.fold, 0.05));
      tr.appendChild(pct(s.qc.debris, 0.05));
      tr.appendChild(el("td", "num", s.patches === null ? "–" : s.patches));
      tr.appendChild(el("td", "num", s.regions === null ? "–" : s.regions));
      var open = el("td");
      if (s.has_result || (s.slide && s.status !== "failed")) {
        var a = el("a", null, "open"); a.href = u("slides/" + encodeURIComponent(s.name) + "/");
        open.appendChild(a);
      }
      tr.appendChild(open);
      tbody.appendChild(tr);
    });
    document.body.dataset.ready = "1";
  }).catch(function (e) { document.getElementById("summary").textContent = "Cannot load: " + e.message; });
})();
