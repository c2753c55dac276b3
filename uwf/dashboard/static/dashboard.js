// uwf dashboard: live pages. One EventSource on the log's stream (/log/stream); when an
// event arrives the page's <main> is fetched again and swapped in (the log page appends
// the event's row instead). No polling: the browser's EventSource only reconnects.
(function () {
  "use strict";
  var body = document.body;
  var mode = body.dataset.live || "refresh";
  var after = body.dataset.after || "0";
  var stream = body.dataset.stream || "/log/stream";
  var badge = document.getElementById("live");
  var pending = null;
  var waitMs = mode === "slow" ? 3000 : 300;

  function say(on) {
    if (!badge) { return; }
    badge.className = "live " + (on ? "on" : "off");
    badge.textContent = on ? "live" : "reconnecting";
  }

  function refresh() {
    pending = null;
    var open = Array.prototype.map.call(document.querySelectorAll("details[open][id]"),
                                        function (d) { return d.id; });
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        var main = document.querySelector("main");
        if (!fresh || !main) { return; }
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
    cell(row, event.ts, "time");
    cell(row, event.type);
    cell(row, event.subject, "id");
    var code = document.createElement("code");
    code.textContent = JSON.stringify(event.data);
    cell(row, "").appendChild(code);
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
