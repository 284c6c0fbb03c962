// Live progress of a running check, over server-sent events. The page works without it:
// it then reloads itself every few seconds (a <noscript> refresh). Every value is set as
// text, never as HTML.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) {
    return;
  }
  const source = new EventSource(live.dataset.events);
  const text = (id, value) => {
    const node = document.getElementById(id);
    if (node) {
      node.textContent = value;
    }
  };
  source.addEventListener("progress", (event) => {
    const p = JSON.parse(event.data);
    text("state", p.state);
    text("count", p.done + " of " + p.total);
    const bar = document.getElementById("progress");
    if (bar) {
      bar.max = Math.max(p.total, 1);
      bar.value = p.done;
    }
    const body = document.querySelector("#results tbody");
    if (body) {
      body.replaceChildren(...p.results.map((r) => {
        const row = document.createElement("tr");
        for (const [value, cls] of [[r.probe, "mono"], [r.device, ""], [r.verdict, "pill " + r.class]]) {
          const cell = document.createElement("td");
          if (cls.startsWith("pill")) {
            const pill = document.createElement("span");
            pill.className = cls;
            pill.textContent = value;
            cell.appendChild(pill);
          } else {
            cell.className = cls;
            cell.textContent = value;
          }
          row.appendChild(cell);
        }
        return row;
      }));
    }
    const log = document.getElementById("log");
    if (log && p.log) {
      log.textContent = p.log.join("\n");
    }
    if (!p.running) {
      const stop = document.getElementById("stop-form");
      if (stop) {
        stop.remove();
      }
    }
  });
  source.addEventListener("done", (event) => {
    source.close();
    live.dataset.finished = "1";
    window.location.assign(JSON.parse(event.data).href);
  });
})();
