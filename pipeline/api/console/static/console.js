// Fenceline review console: keyboard shortcuts and live updates. No third-party code.
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

  // Evidence links: flash the marked span they point at.
  document.addEventListener("click", function (ev) {
    var link = ev.target.closest ? ev.target.closest("a.evidence-link") : null;
    if (!link) { return; }
    var target = document.getElementById(link.getAttribute("href").slice(1));
    if (target) {
      target.classList.add("focus");
      window.setTimeout(function () { target.classList.remove("focus"); }, 1500);
    }
  });

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
