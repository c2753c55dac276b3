// uwf dashboard: live pages. One EventSource on the log's stream (/log/stream); when an
// event arrives the page's <main> is fetched again and swapped in (the log page appends
// the event's row instead). No polling: the browser's EventSource only reconnects.
// Relative times ("3 min ago") are counted again every 30 s from the server's clock
// (body data-now, read when the page was made), so an idle page stays right.
(function () {
  "use strict";
  var body = document.body;
  var mode = body.dataset.live || "refresh";
  var after = body.dataset.after || "0";
  var stream = body.dataset.stream || "/log/stream";
  var badge = document.getElementById("live");
  var pending = null;
  // Refreshes started, and the newest one swapped in: fetches overlap when events come
  // while one is in flight, and their answers may arrive out of order; an answer older
  // than the page already shown is dropped (it would bring back what a later event
  // changed: a failure a retry had cleared, say).
  var asked = 0;
  var shown = 0;
  var waitMs = mode === "slow" ? 3000 : 300;
  // The server's clock minus this browser's, when the page was made.
  var skew = (Number(body.dataset.now) || Date.now()) - Date.now();
  var BRIEF = 96;
  var STEPS = [[86400000, "day"], [3600000, "h"], [60000, "min"], [1000, "s"]];

  function ago(ms) {
    var delta = Date.now() + skew - ms;
    var size = Math.abs(delta);
    if (size < 1000) { return "just now"; }
    for (var i = 0; i < STEPS.length; i++) {
      if (size >= STEPS[i][0]) {
        var count = Math.floor(size / STEPS[i][0]);
        var said = count + " " + STEPS[i][1] + (STEPS[i][1] === "day" && count !== 1 ? "s" : "");
        return delta > 0 ? said + " ago" : "in " + said;
      }
    }
    return "just now";
  }

  function recount() {
    Array.prototype.forEach.call(document.querySelectorAll("time[data-ago]"), function (t) {
      var ms = Date.parse(t.getAttribute("datetime"));
      if (!isNaN(ms)) { t.textContent = ago(ms); }
    });
  }
  setInterval(recount, 30000);

  function when(ts) {
    var t = document.createElement("time");
    t.setAttribute("datetime", ts);
    t.setAttribute("title", ts + " (UTC)");
    t.setAttribute("data-ago", "");
    t.className = "time";
    var ms = Date.parse(ts);
    t.textContent = isNaN(ms) ? ts : ago(ms);
    return t;
  }

  function brief(data) {
    var text;
    if (data !== null && typeof data === "object" && !Array.isArray(data)) {
      text = Object.keys(data).map(function (key) {
        var value = data[key];
        return key + ": " + (typeof value === "string" ? value : JSON.stringify(value));
      }).join(", ");
    } else {
      text = JSON.stringify(data);
    }
    return text.length <= BRIEF ? text : text.slice(0, BRIEF - 1) + "\u2026";
  }

  function say(on) {
    if (!badge) { return; }
    badge.className = "live " + (on ? "on" : "off");
    badge.textContent = on ? "live" : "reconnecting";
  }

  function refresh() {
    pending = null;
    var mine = ++asked;
    var open = Array.prototype.map.call(document.querySelectorAll("details[open][id]"),
                                        function (d) { return d.id; });
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        var main = document.querySelector("main");
        if (!fresh || !main || mine < shown) { return; }
        shown = mine;
        main.replaceWith(document.adoptNode(fresh));
        open.forEach(function (id) {
          var details = document.getElementById(id);
          if (details) { details.open = true; }
        });
      })
      .catch(function () { /* the next event tries again */ });
  }

  function cell(row, text, className) {
    var td = document.createElement("td");
    if (className) { td.className = className; }
    td.textContent = text;
    row.appendChild(td);
    return td;
  }

  function append(data) {
    var rows = document.getElementById("log-rows");
    if (!rows) { return; }
    var event;
    try { event = JSON.parse(data); } catch (e) { return; }
    var empty = document.getElementById("log-empty");
    if (empty) { empty.remove(); }
    var row = document.createElement("tr");
    row.className = "fresh";
    cell(row, String(event.seq), "num");
    cell(row, "").appendChild(when(event.ts));
    cell(row, event.type, "type");
    cell(row, event.subject, "id");
    var details = document.createElement("details");
    var summary = document.createElement("summary");
    summary.textContent = brief(event.data);
    var pre = document.createElement("pre");
    pre.textContent = JSON.stringify(event.data, null, 2);
    details.appendChild(summary);
    details.appendChild(pre);
    cell(row, "", "data").appendChild(details);
    rows.appendChild(row);
  }

  if (mode === "off" || typeof EventSource === "undefined") { return; }
  var url = stream + (stream.indexOf("?") >= 0 ? "&" : "?") + "after=" + encodeURIComponent(after);
  var source = new EventSource(url);
  source.onopen = function () { say(true); };
  source.onerror = function () { say(false); };
  source.addEventListener("log", function (message) {
    say(true);
    if (mode === "append") {
      append(message.data);
    } else if (pending === null) {
      pending = setTimeout(refresh, waitMs);
    }
  });
}());
