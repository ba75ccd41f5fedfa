// postpone dashboard: the only script. Vendored, no build step.
// - <time datetime> elements: absolute time in the browser's zone plus a relative one ("in 4m", "3h ago").
// - Live figures: server-sent events from `events` fill the elements marked data-live (textContent only).
// - Parts of a page marked data-part are fetched again and swapped in (the overview's charts every 30 s,
//   and its table at once when a topic appears), without reloading the page.
// - Forms with data-confirm ask first.
(function () {
  "use strict";

  function span(ms) {
    var s = Math.round(Math.abs(ms) / 1000);
    if (s < 1) return "now";
    var d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60, r = s % 60;
    if (d) return d + "d" + (h ? " " + h + "h" : "");
    if (h) return h + "h" + (m ? " " + m + "m" : "");
    if (m) return m + "m" + (r ? " " + r + "s" : "");
    return r + "s";
  }

  function relative(t) {
    var ms = t.getTime() - Date.now();
    if (Math.abs(ms) < 1000) return "now";
    return ms > 0 ? "in " + span(ms) : span(ms) + " ago";
  }

  var absolute = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"
  });

  function formatTimes() {
    var times = document.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var el = times[i], t = new Date(el.getAttribute("datetime"));
      if (isNaN(t.getTime())) continue;
      var abs = absolute.format(t);
      el.textContent = relative(t) + " · " + abs;
      el.title = abs + " (" + el.getAttribute("datetime") + ")";
    }
  }

  function setLive(field, topic, value) {
    var els = document.querySelectorAll('[data-live="' + field + '"]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      if (topic !== null && el.getAttribute("data-topic") !== topic) continue;
      if (typeof value === "boolean") {
        el.hidden = !value;
      } else if (el.textContent !== String(value)) {
        var first = el.textContent === "…";
        el.textContent = String(value);
        if (first) continue;
        el.classList.remove("changed");
        void el.offsetWidth;
        el.classList.add("changed");
      }
    }
  }

  var refreshing = false;

  function refreshParts() {
    if (refreshing || !document.querySelector("[data-part]")) return;
    refreshing = true;
    fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var parts = document.querySelectorAll("[data-part]");
        for (var i = 0; i < parts.length; i++) {
          var name = parts[i].getAttribute("data-part");
          var fresh = doc.querySelector('[data-part="' + name + '"]');
          if (fresh) parts[i].replaceWith(document.importNode(fresh, true));
        }
        formatTimes();
      })
      .catch(function () {})
      .then(function () { refreshing = false; });
  }

  function knownTopic(name) {
    var els = document.querySelectorAll("[data-part] [data-topic]");
    for (var i = 0; i < els.length; i++) if (els[i].getAttribute("data-topic") === name) return true;
    return false;
  }

  function connect() {
    var status = document.getElementById("live");
    if (!window.EventSource) return;
    var source = new EventSource("events");
    source.addEventListener("open", function () {
      if (status) { status.textContent = "● live"; status.className = "live on"; }
    });
    source.addEventListener("error", function (e) {
      if (status) {
        status.textContent = "○ reconnecting";
        status.className = "live off";
        if (e && e.data) status.title = e.data;
      }
    });
    source.addEventListener("figures", function (e) {
      var f = JSON.parse(e.data);
      setLive("workers", null, f.workers);
      if (document.querySelector('[data-part="topics"]')) {
        for (var topic in f.topics) {
          if (Object.prototype.hasOwnProperty.call(f.topics, topic) && !knownTopic(topic)) { refreshParts(); break; }
        }
      }
      for (var name in f.topics) {
        if (!Object.prototype.hasOwnProperty.call(f.topics, name)) continue;
        var t = f.topics[name];
        for (var field in t) {
          if (Object.prototype.hasOwnProperty.call(t, field)) setLive(field, name, t[field]);
        }
      }
      document.body.setAttribute("data-live-at", String(Date.now()));
    });
  }

  function confirmations() {
    document.addEventListener("submit", function (e) {
      var question = e.target.getAttribute && e.target.getAttribute("data-confirm");
      if (question && !window.confirm(question)) e.preventDefault();
    });
  }

  function start() {
    formatTimes();
    setInterval(formatTimes, 5000);
    setInterval(refreshParts, 30000);
    confirmations();
    connect();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
