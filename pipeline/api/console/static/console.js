// Fenceline review console: keyboard shortcuts, live updates and the dashboard's refresh. No third-party code.
// Everything here is optional: every page reads and every form posts without it.
"use strict";
(function () {
  var body = document.body;

  function typing(el) {
    var tag = el && el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (el && el.isContentEditable);
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) { return; }
    var el = null;
    if (ev.key === "a") { el = document.getElementById("approve"); }
    else if (ev.key === "n") { el = document.getElementById("next") || document.querySelector("a.open"); }
    else if (ev.key === "q") { window.location.assign("/console/queue"); ev.preventDefault(); return; }
    else if (ev.key === "/") {
      var f = document.getElementById("filter");
      if (f) { f.focus(); ev.preventDefault(); }
      return;
    }
    if (el) { ev.preventDefault(); el.click(); }
  });

  // Evidence links: flash the boxes on the page image (the page view) or else the
  // marked span in the text they point at.
  document.addEventListener("click", function (ev) {
    var link = ev.target.closest ? ev.target.closest("a.evidence-link") : null;
    if (!link) { return; }
    var tr = link.closest("tr");
    var box = tr ? document.querySelector('rect.evbox[data-row="' + tr.id + '"]') : null;
    if (box) {
      ev.preventDefault();
      box.scrollIntoView({ block: "center" });
      linked(tr.id, true);
      window.setTimeout(function () { linked(tr.id, false); }, 1500);
      return;
    }
    var target = document.getElementById(link.getAttribute("href").slice(1));
    if (target) {
      target.classList.add("focus");
      window.setTimeout(function () { target.classList.remove("focus"); }, 1500);
    }
  });

  // The page view: a box and its field's row light up together, either way hovered.
  function linked(row, on) {
    if (!row) { return; }
    var tr = document.getElementById(row);
    if (tr) { tr.classList.toggle("linked", on); }
    var boxes = document.querySelectorAll('rect.evbox[data-row="' + row + '"]');
    for (var i = 0; i < boxes.length; i++) { boxes[i].classList.toggle("linked", on); }
  }
  function rowOf(el) {
    if (!el || !el.closest) { return null; }
    var box = el.closest("rect.evbox");
    if (box) { return box.getAttribute("data-row"); }
    var tr = el.closest('tr[id^="field-"]');
    return tr ? tr.id : null;
  }
  document.addEventListener("mouseover", function (ev) { linked(rowOf(ev.target), true); });
  document.addEventListener("mouseout", function (ev) { linked(rowOf(ev.target), false); });

  // Zoom: the pages' width, a quarter step at a time (50 % to 400 %).
  var pages = document.getElementById("pages");
  var zoom = 1;
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest ? ev.target.closest("button[data-zoom]") : null;
    if (!button || !pages) { return; }
    zoom = Math.min(4, Math.max(0.5, zoom + 0.25 * Number(button.getAttribute("data-zoom"))));
    pages.style.width = (zoom * 100) + "%";
    var level = document.getElementById("zoom-level");
    if (level) { level.textContent = Math.round(zoom * 100) + "%"; }
  });

  // The dashboard: poll its fragment and swap it in, so the counts stay current
  // without a reload (paused while the tab is hidden; one request at a time).
  var live = document.getElementById("dashboard-body");
  if (live) {
    var liveUrl = live.getAttribute("data-refresh-url");
    var every = Math.max(2, Number(live.getAttribute("data-refresh-seconds")) || 10) * 1000;
    var busy = false;
    var refresh = function () {
      if (busy || document.hidden) { return; }
      busy = true;
      fetch(liveUrl, { credentials: "same-origin" }).then(function (r) {
        if (r.status === 401 || r.redirected) { window.location.assign("/console/login"); return null; }
        return r.ok ? r.text() : Promise.reject(new Error(String(r.status)));
      }).then(function (html) {
        if (html !== null) { live.innerHTML = html; live.removeAttribute("data-stale"); }
      }).catch(function () {
        live.setAttribute("data-stale", "true");
      }).then(function () { busy = false; });
    };
    window.setInterval(refresh, every);
    document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
  }

  var events = body.getAttribute("data-events");
  if (!events || !window.EventSource) { return; }
  var source = new EventSource(events);
  var fragment = body.getAttribute("data-fragment");
  var version = body.getAttribute("data-state-version");
  source.addEventListener("state", function (msg) {
    var data;
    try { data = JSON.parse(msg.data); } catch (e) { return; }
    if (data.snapshot) { return; }  // the state as of connecting: the page already shows it
    if (fragment) {
      fetch(fragment, { credentials: "same-origin" }).then(function (r) {
        return r.ok ? r.text() : null;
      }).then(function (html) {
        var rows = document.getElementById("queue-rows");
        if (html !== null && rows) { rows.innerHTML = html; }
      });
    } else if (version && String(data.state_version) !== version) {
      var banner = document.getElementById("live-banner");
      if (banner) { banner.hidden = false; }
      var state = document.getElementById("job-state");
      if (state) { state.textContent = data.state; }
    }
  });
  source.addEventListener("revoked", function () { source.close(); });
  source.addEventListener("end", function () { source.close(); });
})();
