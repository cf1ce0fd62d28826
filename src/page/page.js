"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) {
      if (k === null || k === undefined) continue;
      if (k instanceof Node) e.append(k);
      else e.append(...rich(String(k), tag));
    }
    return e;
  };
  // Text with `code` spans, as the book and report.md write them: each
  // pair of backticks becomes a <code> (L1); kept literal where an element
  // holds text alone.
  function rich(text, tag) {
    if (!text.includes("`") || ["option", "title", "pre", "code", "textarea"].includes(tag)) return [text];
    const out = [];
    const parts = text.split(/`([^`\n]+)`/);
    parts.forEach((p, i) => {
      if (i % 2) { const c = document.createElement("code"); c.textContent = p; out.push(c); } else if (p) out.push(p);
    });
    return out;
  }
  // An element that acts on a click acts on Enter and Space too, and is
  // reached with Tab.
  const pressable = (e, act) => {
    e.tabIndex = 0;
    e.addEventListener("click", act);
    e.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); act(ev); }
    });
    return e;
  };
  const nodeIndex = new Map(data.nodes.map((n, i) => [n[0], i]));
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#499894", "#76b7b2", "#edc948", "#b07aa1", "#86bcb6", "#9c755f", "#bab0ac"];  // no red: red marks a failure
  const NUMBER = /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

  // ---- Stages -------------------------------------------------------------
  function stages() {
    const box = $("stages");
    if (data.nothing_built) {
      box.append(el("p", { class: "notice", id: "nothing-built" },
        "Nothing has been built in this workspace yet: `vitgraph build` runs the study, and this page shows its results once written again."));
    }
    for (const w of data.warnings) box.append(el("p", { class: "notice warning" }, "warning: " + w));
    const t = el("table", { id: "stage-table" });
    // "not needed" only where a precision target left repetitions out.
    const gated = data.stages.some((s) => s.not_needed > 0);
    const heads = ["stage", "pipeline", "fresh", "stale", "failed", "running", ...(gated ? ["not needed"] : []), "stale because"];
    t.append(el("tr", {}, ...heads.map((h) => el("th", {}, h))));
    data.stages.forEach((s, i) => {
      const reasons = s.reasons.map(([k, n]) => `${k} ${n}`).join(", ");
      t.append(el("tr", { "data-stage": s.name },
        el("td", {}, el("i", { style: `display:inline-block;width:10px;height:10px;margin-right:6px;background:${PALETTE[i % PALETTE.length]}` }), s.name,
          s.description ? el("div", { class: "stage-desc" }, s.description) : null),
        el("td", {}, s.pipeline),
        el("td", { class: "num" }, s.fresh), el("td", { class: "num" }, s.stale),
        el("td", { class: "num" }, s.failed), el("td", { class: "num" }, s.running),
        gated ? el("td", { class: "num" }, s.not_needed) : null, el("td", {}, reasons)));
    });
    box.append(t);
    const total = (k) => data.stages.reduce((a, s) => a + s[k], 0);
    box.append(el("p", { id: "totals" }, `${data.nodes.length} nodes: ${total("fresh")} fresh, ${total("stale")} stale${total("never_built") ? ` (${total("never_built")} never built)` : ""}, ${total("failed")} failed, ${total("running")} running` + (gated ? `, ${total("not_needed")} repetitions not needed.` : ".")));
    if (data.elsewhere && data.elsewhere.length) {
      const n = data.elsewhere.reduce((a, [, k]) => a + k, 0);
      box.append(el("p", { class: "notice", id: "elsewhere" },
        `Measured elsewhere: ${n} ${n === 1 ? "run" : "runs"} measured on another machine, with other environment facets, stand for this machine's (fresh here; \`vitgraph build --measure-here\` measures them here): `,
        ...data.elsewhere.flatMap(([place, k], j) => [j ? "; " : "", `${k} on ${place}`]), "."));
    }
    precision(box);
    // A build in progress as the page was written: its running nodes,
    // apart from the stale ones waiting for it.
    const running = data.nodes.map((n, i) => [n, i]).filter(([n]) => n[2] === "running");
    if (running.length) {
      const of = data.progress ? `${data.progress[0]} of ${data.progress[1]} planned nodes done, ` : "";
      box.append(el("p", { class: "notice", id: "in-progress" },
        `Build in progress: ${of}${running.length} node${running.length === 1 ? "" : "s"} running as this page was written (`,
        ...running.slice(0, 5).flatMap(([n, i], k) => [k ? ", " : "", el("a", { href: "#node-detail", onclick: () => show(i) }, n[0])]),
        running.length > 5 ? `, … ${running.length - 5} more` : "",
        "); `vitgraph report` writes the page again when it ends."));
    }
    // The stale nodes and their grouped reasons, a few per stage (all in
    // Nodes below); a stage of more than a few nodes none of which was
    // ever built is one line with their count, as in the precision list.
    const stale = data.nodes.map((n, i) => [n, i]).filter(([n]) => n[2] !== "fresh" && n[2] !== "not-needed" && n[2] !== "running");
    if (stale.length) {
      box.append(el("h3", {}, "Stale nodes"));
      const byStage = new Map();
      for (const e of stale) byStage.set(e[0][1], [...(byStage.get(e[0][1]) || []), e]);
      const list = el("ul", { class: "reasons", id: "stale-list" });
      for (const [stage, nodes] of byStage) {
        const name = data.stages[stage].name;
        if (nodes.length > 5 && nodes.every(([n]) => n[2] === "never-built")) {
          list.append(el("li", {}, el("span", { class: "badge never-built" }, "never-built"), ` ${name}: ${nodes.length} nodes, none built yet (under Nodes)`));
          continue;
        }
        for (const [n, i] of nodes.slice(0, 5)) {
          list.append(el("li", {}, el("span", { class: "badge " + n[2] }, n[2]), " ",
            el("a", { href: "#node-detail", onclick: () => show(i) }, n[0]), ": ", (data.details[i].reasons || []).join("; ")));
        }
        if (nodes.length > 5) list.append(el("li", {}, `… ${nodes.length - 5} more of ${name} under Nodes`));
      }
      box.append(list);
    }
  }

  // Configurations of stages with a precision target: how many met it, and
  // the ones that did not (budget spent, or still imprecise), flagged.
  function precision(box) {
    if (!data.precision.length) return;
    const met = data.precision.filter((p) => p.state === "precise").length;
    box.append(el("h3", {}, "Precision targets"));
    box.append(el("p", { id: "precision-line" }, `${met} of ${data.precision.length} configurations within their target.`));
    const flagged = data.precision.filter((p) => p.state !== "precise");
    if (!flagged.length) return;
    // Per stage: at most PER_STAGE configurations listed (a spent budget
    // first), the rest counted; configurations not built yet only counted.
    const PER_STAGE = 5;
    const list = el("ul", { class: "reasons", id: "precision-list" });
    const stages = [...new Set(flagged.map((p) => p.stage))];
    for (const stage of stages) {
      const mine = flagged.filter((p) => p.stage === stage);
      const unbuilt = mine.filter((p) => p.state === "stale");
      const judged = mine.filter((p) => p.state !== "stale")
        .sort((a, b) => (a.state === "budget_spent" ? 0 : 1) - (b.state === "budget_spent" ? 0 : 1));
      for (const p of judged.slice(0, PER_STAGE)) {
        const badge = p.state === "budget_spent" ? "budget spent" : p.state;
        list.append(el("li", {}, el("span", { class: "badge " + (p.state === "budget_spent" ? "failed" : "stale") }, badge), " ", p.configuration, ": ", p.detail));
      }
      if (judged.length > PER_STAGE) {
        list.append(el("li", { class: "more" }, `… and ${judged.length - PER_STAGE} more configurations of ${stage} outside their target`));
      }
      if (unbuilt.length) {
        list.append(el("li", { class: "unbuilt" }, el("span", { class: "badge stale" }, "not built"), " ", `${stage}: ${unbuilt.length} configuration${unbuilt.length === 1 ? "" : "s"} with a repetition not built yet`));
      }
    }
    box.append(list);
  }

  // ---- Timeline -----------------------------------------------------------
  function timeline() {
    const box = $("build-info");
    const b = data.build;
    if (!b) {
      box.append(el("p", { class: "empty", id: "no-build" }, "No build has been recorded yet."));
      return;
    }
    const describe = (x) => x.since
      ? `Every attempt since ${x.since} (of ${x.of} build(s)): from ${x.started}, ${fmtMs(Math.round(x.seconds * 1000))}, ${x.bars} node(s) started.`
      : `Build ${x.number} of ${b.of}${x.host ? " on " + x.host : ""}, started ${x.started}, ${fmtMs(Math.round(x.seconds * 1000))}, ${x.bars} node(s) started.`;
    const line = el("p", { id: "build-line" }, describe(b) + " Hover a bar for its node and duration.");
    box.append(line);
    // The recent builds: those the page holds switch the timeline in place.
    const missing = el("p", { id: "build-missing", class: "notice", hidden: "" });
    if ((data.builds || []).length > 1) {
      const pick = el("select", { id: "build-picker", "aria-label": "build" }, ...data.builds.map((x) =>
        el("option", { value: x.number }, `build ${x.number}${x.host ? " on " + x.host : ""}: ${x.started}, ${fmtMs(Math.round(x.seconds * 1000))}, ${x.bars} node(s)${x.embedded ? "" : " (not in this page)"}`)));
      pick.value = String(b.number);
      pick.addEventListener("input", () => switchTo(Number(pick.value)));
      box.append(el("label", { class: "picker" }, "Build ", pick), missing);
    }
    const legend = el("div", { class: "legend" });
    box.append(legend);
    // The node and duration of the bar under the pointer.
    const tip = el("div", { id: "tip", class: "tip", hidden: "" });
    document.body.append(tip);
    const first = $("timeline-svg");
    const original = first.cloneNode(true);
    wire(first);

    function wire(svg) {
      legend.replaceChildren();
      const drawn = new Set([...svg.querySelectorAll("rect.bar")].map((r) => [...r.classList].find((c) => /^s\d+$/.test(c))));
      data.stages.forEach((s, i) => {
        if (drawn.has("s" + i)) legend.append(el("span", {}, el("i", { style: `background:${PALETTE[i % PALETTE.length]}` }), s.name));
      });
      if (svg.querySelector("rect.bar.replaced")) {
        legend.append(el("span", { class: "replaced-key" }, el("i", {}), "a run a later build replaced (vitgraph build --force): drawn faint, with its own duration"));
      }
      if (svg.querySelector("rect.alone")) {
        legend.append(el("span", { class: "alone-key" }, el("i", {}), "a measurement that held the whole machine (shaded across the lanes)"));
      }
      svg.addEventListener("mousemove", (ev) => {
        const bar = ev.target.closest && ev.target.closest("rect.bar");
        if (!bar) { tip.hidden = true; return; }
        const i = Number(bar.dataset.i);
        const name = i >= 0 ? data.nodes[i][0] : "(a node no longer in the pipelines)";
        const status = [...bar.classList].find((c) => ["failed", "interrupted", "running"].includes(c))
          || (bar.classList.contains("replaced") ? "succeeded; its run was replaced by a later build's" : "succeeded");
        tip.textContent = `${name} — ${fmtMs(Number(bar.dataset.d))} (${status})`;
        tip.style.left = ev.pageX + 12 + "px";
        tip.style.top = ev.pageY + 12 + "px";
        tip.hidden = false;
      });
      svg.addEventListener("mouseleave", () => { tip.hidden = true; });
      for (const old of box.querySelectorAll(".zoom")) old.remove();
      const zoom = timelineZoom(svg, box);
      svg.addEventListener("click", (ev) => {
        if (zoom.brushed()) return;
        const bar = ev.target.closest && ev.target.closest("rect.bar");
        if (bar && Number(bar.dataset.i) >= 0) show(Number(bar.dataset.i));
      });
    }

    function switchTo(n) {
      const x = data.builds.find((y) => y.number === n);
      const template = document.getElementById("timeline-build-" + n);
      const svg = n === b.number ? original.cloneNode(true)
        : template ? template.content.querySelector("svg").cloneNode(true) : null;
      if (!svg) {
        missing.textContent = `Build ${n} (${x.bars} node(s)) is not in this page: \`vitgraph report --build ${n}\` writes a page that shows it.`;
        missing.hidden = false;
        return;
      }
      missing.hidden = true;
      $("timeline-svg").replaceWith(svg);
      line.textContent = (n === b.number ? describe(b) : describe(x)) + " Hover a bar for its node and duration.";
      wire(svg);
    }
  }

  // A window of the build's time: drag across the timeline to zoom into it,
  // or use the buttons (keyboard too). Bars keep their true length at the
  // new scale (at least the narrowest drawn), the axis is ticked anew, and a
  // bar wide enough to hold text is labelled with its node.
  function timelineZoom(svg, box) {
    const NS = "http://www.w3.org/2000/svg";
    const left = Number(svg.dataset.left), plotW = Number(svg.dataset.plotW);
    const span = Number(svg.dataset.spanMs), minBar = Number(svg.dataset.minBar);
    const height = Number(svg.getAttribute("height"));
    const bars = [...svg.querySelectorAll("#timeline-bars rect.bar")].map((r) => ({
      r, at: (r.x.baseVal.value - left) / plotW * span, d: Number(r.dataset.d), i: Number(r.dataset.i),
    }));
    const alone = [...svg.querySelectorAll("#timeline-bars rect.alone")].map((r) => ({ r, at: Number(r.dataset.at), d: Number(r.dataset.d) }));
    let view = [0, span];
    let brushedAt = 0;
    const line = el("p", { id: "timeline-window" });
    const button = (label, act) => el("button", { type: "button", onclick: act }, label);
    const zoomBy = (f) => {
      const mid = (view[0] + view[1]) / 2, half = (view[1] - view[0]) / 2 * f;
      set(mid - half, mid + half);
    };
    box.append(el("div", { class: "zoom" },
      button("Zoom in", () => zoomBy(0.5)), " ", button("Zoom out", () => zoomBy(2)), " ",
      button("Whole build", () => set(0, span)), " ", line));
    const toX = (ms) => left + (ms - view[0]) / (view[1] - view[0]) * plotW;
    const toMs = (x) => view[0] + (x - left) / plotW * (view[1] - view[0]);
    function set(a, b) {
      const w = Math.min(Math.max(b - a, Math.min(span, 1)), span);
      a = Math.min(Math.max(a, 0), span - w);
      view = [a, a + w];
      render();
    }
    function ticks() {
      const g = svg.querySelector("#timeline-ticks");
      g.replaceChildren();
      const raw = (view[1] - view[0]) / 1000 / 6;
      const p = Math.pow(10, Math.floor(Math.log10(raw)));
      const step = [1, 2, 5, 10].map((m) => m * p).find((x) => x >= raw) || 10 * p;
      const digits = step >= 1 ? 0 : Math.ceil(-Math.log10(step) - 1e-9);
      for (let t = Math.ceil(view[0] / 1000 / step) * step; t * 1000 <= view[1] + 1e-9; t += step) {
        const x = toX(t * 1000).toFixed(1);
        const l = document.createElementNS(NS, "line");
        for (const [k, v] of [["class", "tick"], ["x1", x], ["x2", x], ["y1", 24], ["y2", height]]) l.setAttribute(k, v);
        const text = document.createElementNS(NS, "text");
        for (const [k, v] of [["class", "tick"], ["x", x], ["y", 14]]) text.setAttribute(k, v);
        text.textContent = t.toFixed(digits) + " s";
        g.append(l, text);
      }
    }
    // The page draws the whole build; the first render only labels it.
    let drawn = true;
    function render() {
      for (const old of svg.querySelectorAll("text.bar-label")) old.remove();
      const k = plotW / (view[1] - view[0]);
      const whole = view[0] <= 0 && view[1] >= span;
      for (const b of bars) {
        const x = toX(b.at), w = Math.max(b.d * k, minBar);
        if (!(drawn && whole)) {
          b.r.setAttribute("x", x.toFixed(1));
          b.r.setAttribute("width", w.toFixed(1));
        }
        // The part of the bar inside the window, if it can hold a name.
        const from = Math.max(x, left), to = Math.min(x + w, left + plotW);
        if (b.i < 0 || to - from < 60) continue;
        const name = data.nodes[b.i][0];
        const fits = Math.floor((to - from - 6) / 6.2);
        const text = document.createElementNS(NS, "text");
        text.setAttribute("class", "bar-label");
        text.setAttribute("x", (from + 3).toFixed(1));
        text.setAttribute("y", 12);
        text.textContent = name.length > fits ? name.slice(0, Math.max(fits - 1, 1)) + "…" : name;
        b.r.parentNode.append(text);
      }
      if (!(drawn && whole)) {
        for (const a of alone) {
          a.r.setAttribute("x", toX(a.at).toFixed(1));
          a.r.setAttribute("width", Math.max(a.d * k, minBar).toFixed(1));
        }
        ticks();
      }
      drawn = whole && drawn;
      line.textContent = whole
        ? `The whole build, ${fmtMs(Math.round(span))}. Drag across the timeline to zoom in.`
        : `${(view[0] / 1000).toFixed(2)} s to ${(view[1] / 1000).toFixed(2)} s of ${fmtMs(Math.round(span))}.`;
    }
    // Dragging across the plot draws the window to zoom into.
    const brush = document.createElementNS(NS, "rect");
    brush.setAttribute("id", "timeline-brush");
    brush.setAttribute("y", 0);
    brush.setAttribute("height", height);
    brush.style.display = "none";
    svg.append(brush);
    const svgX = (ev) => {
      const p = svg.createSVGPoint();
      p.x = ev.clientX; p.y = ev.clientY;
      return p.matrixTransform(svg.getScreenCTM().inverse()).x;
    };
    let start = null;
    svg.addEventListener("mousedown", (ev) => {
      const x = svgX(ev);
      if (ev.button !== 0 || x < left || x > left + plotW) return;
      start = x;
      ev.preventDefault();
    });
    svg.addEventListener("mousemove", (ev) => {
      if (start === null) return;
      const x = Math.min(Math.max(svgX(ev), left), left + plotW);
      brush.setAttribute("x", Math.min(start, x));
      brush.setAttribute("width", Math.abs(x - start));
      brush.style.display = "";
    });
    window.addEventListener("mouseup", (ev) => {
      if (start === null) return;
      const x = Math.min(Math.max(svgX(ev), left), left + plotW);
      brush.style.display = "none";
      if (Math.abs(x - start) > 4) {
        brushedAt = Date.now();
        set(toMs(Math.min(start, x)), toMs(Math.max(start, x)));
      }
      start = null;
    });
    svg.addEventListener("dblclick", () => set(0, span));
    render();
    return { brushed: () => Date.now() - brushedAt < 400 };
  }

  // ---- An analysis's measured window ----------------------------------------
  // A lane for the batches (NVTX) and one per GPU stream, a bar per kernel
  // (its name and duration on hover), drawn from the page's own data; the
  // whole window's events open in ui.perfetto.dev.
  function windowTracks(t, perfetto, embedded) {
    const NS = "http://www.w3.org/2000/svg";
    const W = 900, LEFT = 130, LANE = 16, TOP = 4;
    const lanes = ["batches", ...t.streams];
    const H = TOP + lanes.length * LANE + 4;
    const svg = document.createElementNS(NS, "svg");
    for (const [k, v] of [["class", "tracks"], ["width", W], ["height", H], ["viewBox", `0 0 ${W} ${H}`], ["role", "img"],
      ["aria-label", "kernels and batches of the measured window"]]) svg.setAttribute(k, v);
    // Only some of the window's kernels: draw the time they cover.
    const partial = t.kernels.length < t.kernels_in_window;
    const covered = Math.max(1, ...t.kernels.map(([, s, d]) => s + d));
    const span = partial ? covered : Math.max(t.duration_ns, 1), plot = W - LEFT - 6;
    const x = (ns) => LEFT + ns / span * plot;
    const add = (tag, attrs, title) => {
      const e = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      if (title) { const tt = document.createElementNS(NS, "title"); tt.textContent = title; e.append(tt); }
      svg.append(e);
      return e;
    };
    lanes.forEach((name, i) => {
      add("text", { x: 2, y: TOP + i * LANE + 11, class: "lane" }).textContent = name;
    });
    for (const [start, dur, text] of t.batches) {
      if (start > span) continue;
      add("rect", { class: "batch", x: x(start).toFixed(1), y: TOP + 1, width: Math.max(Math.min(dur, span - start) / span * plot, 1).toFixed(1), height: LANE - 3 },
        `${text}: ${fmtNs(dur)}`);
    }
    for (const [track, start, dur, name] of t.kernels) {
      add("rect", { class: "kernel", x: x(start).toFixed(1), y: TOP + (track + 1) * LANE + 1, width: Math.max(dur / span * plot, 1).toFixed(1),
        height: LANE - 3, fill: PALETTE[name % PALETTE.length] }, `${t.names[name]}: ${fmtNs(dur)}`);
    }
    const shown = partial
      ? `its first ${t.kernels.length} of ${t.kernels_in_window} kernels (its first ${fmtNs(span)} drawn)`
      : (t.kernels.length ? `its ${t.kernels.length} kernel${t.kernels.length === 1 ? "" : "s"}` : "no kernel in it");
    const out = [el("h4", {}, `Measured window \`${t.window}\` (${fmtNs(t.duration_ns)}), ${shown}`), svg];
    if (perfetto) {
      const note = el("span", { class: "perfetto-note" });
      out.push(el("p", { class: "perfetto" }, el("a", { href: perfetto[2], download: "" }, "window.perfetto.json"),
        ` (${perfetto[1]} B, the whole window's events) · `,
        el("button", { type: "button", onclick: () => openInPerfetto(perfetto[2], note, embedded) }, "Open in ui.perfetto.dev"), " ", note));
    } else {
      out.push(el("p", { class: "perfetto meta" }, "For the window's events in ui.perfetto.dev: `perfetto: true` on this `Analyze` writes them with every build; `vitgraph trace perfetto TRACE -o FILE` writes a whole trace now."));
    }
    return out;
  }

  // ui.perfetto.dev takes a trace by postMessage once it answers a PING.
  // The events come from the page's own data when they travel in it (a
  // small window), which works from a file:// page too; else from the file
  // beside the page, which only a page served over HTTP can read: from a
  // file, the note says to download and drop it before any tab opens.
  async function openInPerfetto(href, note, embedded) {
    let buffer = embedded ? new TextEncoder().encode(embedded).buffer : null;
    if (!buffer && location.protocol !== "file:") {
      try {
        const r = await fetch(href);
        if (r.ok) buffer = await r.arrayBuffer();
      } catch (e) { buffer = null; }
    }
    if (!buffer) {
      note.textContent = "This page cannot hand the file to the Perfetto UI from here: download window.perfetto.json (the link on the left), then drop it into ui.perfetto.dev.";
      return;
    }
    const ui = window.open("https://ui.perfetto.dev/#!/");
    if (!ui) {
      note.textContent = "The browser blocked the new tab: allow pop-ups for this page, or download window.perfetto.json and drop it into ui.perfetto.dev.";
      return;
    }
    note.textContent = "Opening in ui.perfetto.dev…";
    const ping = setInterval(() => ui.postMessage("PING", "https://ui.perfetto.dev"), 100);
    window.addEventListener("message", function pong(ev) {
      if (ev.source !== ui || ev.data !== "PONG") return;
      clearInterval(ping);
      window.removeEventListener("message", pong);
      ui.postMessage({ perfetto: { buffer, title: href.split("/").slice(-2).join("/") } }, "https://ui.perfetto.dev");
      note.textContent = "Sent to ui.perfetto.dev.";
    });
  }

  // ---- Reports ------------------------------------------------------------
  function unit(name) {
    const rules = [[/_ns(\.|$)|_ns\.|ns$/, "ns"], [/(^|_)ms(\.|$)|_ms$/, "ms"], [/_gbps$/, "GB/s"], [/_bytes$|^bytes$/, "B"],
      [/_per_s$/, "/s"], [/_pct$/, "%"], [/_s$/, "s"]];
    for (const [re, u] of rules) if (re.test(name)) return u;
    return "";
  }
  // Long fractions read as four significant digits (the full value on hover).
  // A number as a table shows it: never with invented digits. A whole
  // number below a million exactly; larger magnitudes with an SI prefix
  // and 4 significant digits (874579968 reads 874.6M, not 874600000);
  // others with 4 significant digits. The cell's tooltip has the text.
  function shown(text) {
    const x = Number(text);
    if (!isFinite(x) || x === 0) return text;
    const big = Math.abs(x) >= (Number.isInteger(x) ? 1e6 : 1e4);
    if (big) {
      const k = Math.min(4, Math.floor(Math.log10(Math.abs(x)) / 3));
      const v = Number((x / 10 ** (3 * k)).toPrecision(4));
      return String(v) + ["", "k", "M", "G", "T"][k];
    }
    if (Number.isInteger(x)) return String(x);
    const short = String(Number(x.toPrecision(4)));
    return short.length < text.length ? short : text;
  }
  function cell(text, name, isParam) {
    if (text !== "" && NUMBER.test(text) && !isParam) {
      const u = unit(name);
      const td = el("td", { class: "num" }, shown(text), u ? el("span", { class: "unit" }, u) : null);
      if (shown(text) !== text) td.title = text;
      return td;
    }
    if (text !== "" && NUMBER.test(text)) return el("td", { class: "num" }, text);
    return el("td", {}, text);
  }
  function compareCells(a, b) {
    const na = NUMBER.test(a), nb = NUMBER.test(b);
    if (na && nb) return parseFloat(a) - parseFloat(b);
    if (a === "" && b !== "") return 1;
    if (b === "" && a !== "") return -1;
    return a.localeCompare(b);
  }
  function table(t, params, id) {
    const wrap = el("div", {});
    const envCol = t.names.indexOf("env_group");
    const counts = new Map();
    if (envCol >= 0) for (const r of t.rows) counts.set(r[envCol], (counts.get(r[envCol]) || 0) + 1);
    const main = [...counts.entries()].sort((a, b) => b[1] - a[1])[0];
    const several = counts.size > 1;
    const filters = el("div", { class: "filters" });
    const active = new Map();
    const tbl = el("table", { class: "report-table", id });
    const head = el("tr", {});
    let sortCol = -1, asc = true;
    const body = el("tbody", {});
    // Columns empty in every row, and the long `nodes` one, are hidden; a
    // row's nodes show on a click.
    const nodesCol = t.names.indexOf("nodes");
    const hidden = t.names.map((n, j) => j >= params && (j === nodesCol || t.rows.every((r) => r[j] === "" || r[j] === null)));
    // Bookkeeping columns that read the same in every row are folded into
    // a line under the table (N8): `interval repetitions, env_group env1`.
    const FOLDED = ["interval", "env_group", "reps", "samples"];
    const folded = [];
    if (t.rows.length > 1) {
      t.names.forEach((n, j) => {
        if (hidden[j] || j < params || !FOLDED.includes(n)) return;
        const first = t.rows[0][j];
        if (t.rows.every((r) => r[j] === first)) { hidden[j] = true; folded.push(`${n} ${first}`); }
      });
    }
    // A value and its interval in one cell, as report.md writes it
    // (`1.73 ± 2.0 %`): the bound columns are hidden (table.csv keeps them),
    // and a column whose bounds equal its value in every row (a constant:
    // params, FLOPs) shows none.
    const wideCol = t.names.indexOf("wide");
    const bounds = t.names.map((n, j) => {
      const lo = t.names.indexOf(n + ".ci95_low"), hi = t.names.indexOf(n + ".ci95_high");
      if (j < params || lo < 0 || hi < 0) return null;
      hidden[lo] = hidden[hi] = true;
      const constant = t.rows.every((r) => r[lo] === "" || r[lo] === null || (Number(r[lo]) === Number(r[j]) && Number(r[hi]) === Number(r[j])));
      return constant ? null : [lo, hi];
    });
    const rows = t.rows.map((r) => {
      const tr = el("tr", {}, ...r.map((c, j) => cell(c, t.names[j], j < params)));
      bounds.forEach((b, j) => {
        if (!b) return;
        const [v, lo, hi] = [Number(r[j]), Number(r[b[0]]), Number(r[b[1]])];
        if (r[b[0]] === "" || r[b[0]] === null || !isFinite(lo) || !isFinite(hi) || !v) return;
        const half = (100 * (hi - lo)) / 2 / Math.abs(v);
        const over = wideCol >= 0 && String(r[wideCol] || "").split("; ").some((w) => w.startsWith(t.names[j] + " "));
        tr.children[j].append(el("span", { class: "ci-rel" + (over ? " over" : ""), title: `95 % interval [${fmtNum(lo)}, ${fmtNum(hi)}]` }, ` ± ${half < 10 ? half.toFixed(1) : half.toFixed(0)} %${over ? " ⚠" : ""}`));
      });
      hidden.forEach((h, j) => { if (h) tr.children[j].hidden = true; });
      if (nodesCol >= 0 && r[nodesCol]) {
        tr.classList.add("has-nodes");
        tr.title = "click: the nodes of this row";
        pressable(tr, () => {
          const next = tr.nextElementSibling;
          if (next && next.classList.contains("row-nodes")) { next.remove(); return; }
          // Each id opens its node's details (under Nodes), as the node list does.
          const ids = String(r[nodesCol]).split(" ").filter(Boolean);
          const links = ids.flatMap((id, k) => {
            const i = nodeIndex.get(id);
            const link = i === undefined ? el("span", {}, id)
              : pressable(el("a", { class: "node-link", href: "#node-detail", title: "open this node's details" }, id), (ev) => { ev.preventDefault(); show(i); });
            return k ? [" ", link] : [link];
          });
          tr.after(el("tr", { class: "row-nodes" }, el("td", { colspan: String(t.names.length) }, "nodes: ", ...links)));
        });
      }
      if (several && envCol >= 0 && r[envCol] !== main[0]) {
        tr.classList.add("other-env");
        tr.children[envCol].append(" ", el("span", { class: "badge env", title: "measured in another environment than most rows" }, "other env"));
      }
      tr.dataset.cells = JSON.stringify(r);
      return { r, tr };
    });
    function draw() {
      const list = rows.slice();
      if (sortCol >= 0) list.sort((a, b) => (asc ? 1 : -1) * compareCells(a.r[sortCol], b.r[sortCol]));
      body.replaceChildren(...list.map((x) => x.tr));
      for (const x of rows) {
        let keep = true;
        for (const [j, v] of active) if (x.r[j] !== v) keep = false;
        x.tr.hidden = !keep;
      }
    }
    t.names.forEach((name, j) => {
      const th = el("th", { class: "sortable", title: "sort by " + name }, name, " ", el("span", { class: "arrow" }, ""));
      pressable(th, () => {
        asc = sortCol === j ? !asc : true;
        sortCol = j;
        for (const a of head.querySelectorAll(".arrow")) a.textContent = "";
        th.querySelector(".arrow").textContent = asc ? "▲" : "▼";
        draw();
      });
      if (hidden[j]) th.hidden = true;
      head.append(th);
      if (j < params) {
        const values = [...new Set(t.rows.map((r) => r[j]))].sort(compareCells);
        if (values.length > 1) {
          const sel = el("select", { "data-param": name }, el("option", { value: "" }, "all"), ...values.map((v) => el("option", { value: v }, v)));
          sel.addEventListener("change", () => {
            if (sel.value === "") active.delete(j); else active.set(j, sel.value);
            draw();
            // Whoever draws from the same rows (the plots) hears of it.
            wrap.dispatchEvent(new CustomEvent("filtered", { detail: [...active].map(([k, v]) => `${t.names[k]} = ${v}`) }));
          });
          filters.append(el("label", {}, name + " ", sel));
        }
      }
    });
    tbl.append(el("thead", {}, head), body);
    draw();
    if (filters.children.length) wrap.append(filters);
    wrap.append(el("div", { class: "table-scroll" }, tbl));
    const gone = t.names.filter((n, j) => hidden[j] && j !== nodesCol && !/\.ci95_(low|high)$/.test(n) && !folded.some((f) => f.startsWith(n + " ")));
    if (gone.length || folded.length || nodesCol >= 0) {
      wrap.append(el("p", { class: "meta" }, (folded.length ? `The same in every row: ${folded.join(", ")}. ` : "")
        + (gone.length ? `Not shown, empty in every row: ${gone.join(", ")}. ` : "") + (nodesCol >= 0 ? "Click a row for its nodes." : "")));
    }
    return wrap;
  }
  // What a row's numbers are, as report.md says it: how many runs a row
  // folds (`reps`), and which interval its `±` is (`interval`).
  function methodSentence(t) {
    const col = (name) => t.names.indexOf(name);
    const reps = col("reps"), kind = col("interval"), wide = col("wide");
    if (kind < 0) return "";
    const rows = t.rows.filter((row) => row[kind] !== "" && row[kind] !== null);
    if (!rows.length) return "";
    const counts = reps >= 0 ? rows.map((row) => Number(row[reps])).filter((n) => n > 0) : [];
    const parts = [];
    if (rows.some((row) => row[kind] === "repetitions")) {
      parts.push(`Each row is one configuration; \`reps\` is how many separate runs it folds (${Math.min(...counts)} to ${Math.max(...counts)} here). ` +
        "A number of a row with two or more is the mean over its repetitions, its interval the 95 % t-interval over them (`interval` = `repetitions`).");
    }
    if (rows.some((row) => row[kind] === "within-run")) {
      parts.push("A row of one run shows the 95 % interval of its own batches (`interval` = `within-run`): it says nothing of where the next run lands.");
    }
    if (wide >= 0) parts.push("⚠ in `wide` marks an interval wider than the report's target.");
    return parts.join(" ");
  }
  function reports() {
    const box = $("report-list");
    if (!data.reports.length) {
      box.append(el("p", { class: "empty" }, "No `Report` node has been built."));
      return;
    }
    data.reports.forEach((r, i) => {
      const div = el("div", { class: "report", id: "report-" + i });
      // Headed with the title its run was built with (N15); the banner says what it is now.
      div.append(el("h3", {}, r.built_title || r.title), el("p", { class: "meta report-built" }, `${r.node} · built ${r.built}`));
      // Rows over the report's target, counted before the numbers.
      const wideAt = r.table ? r.table.names.indexOf("wide") : -1;
      const wideRows = wideAt >= 0 ? r.table.rows.filter((row) => row[wideAt] !== "" && row[wideAt] !== null).length : 0;
      if (wideRows) {
        div.append(el("p", { class: "notice warning over-target" }, `⚠ ${wideRows} of ${r.table.rows.length} rows have a 95 % interval wider than the report's target (marked in the table's \`wide\` column): measure them again, or together with what they are compared with.`));
      }
      // Its files: the table as CSV and Parquet, report.md, each plot.
      const ni = data.nodes.findIndex((n) => n[0] === r.node);
      const files = ni >= 0 ? (data.details[ni].files || []) : [];
      if (files.length) {
        div.append(el("p", { class: "downloads" }, "Download: ", ...files.flatMap(([name, , href], k) => [k ? " · " : "", el("a", { href }, name)])));
      }
      // What is shown is the last run's: say so when it is not current.
      const notes = [];
      if (r.running) notes.push("being built right now: what follows is the previous run's.");
      if (r.built_title) notes.push(`built under the title “${r.built_title}”; the pipeline's title is now “${r.title}”.`);
      // A report the pipelines refuse cannot be brought up to date by a build.
      const fix = r.refused
        ? el("p", { class: "refused" }, el("strong", {}, "Refused: "), r.refused)
        : el("p", {}, "`vitgraph build " + r.node + "` brings it up to date.");
      if (r.stale.length) {
        div.append(el("div", { class: "notice warning stale-banner" },
          el("strong", {}, "Stale: "), "the table and plots below are from the run built " + r.built + ", and no longer what the pipelines and inputs would give, because",
          el("ul", { class: "reasons" }, ...r.stale.map((x) => el("li", {}, x))),
          ...notes.map((n) => el("p", {}, n)),
          fix));
      } else if (notes.length || r.refused) {
        div.append(el("div", { class: "notice warning stale-banner" }, ...notes.map((n) => el("p", {}, n)), ...(r.refused ? [fix] : [])));
      }
      if (r.env_lines.length) div.append(el("ul", { class: "env-lines" }, ...r.env_lines.map((l) => el("li", {}, l))));
      const tableBox = r.table && table(r.table, r.params, "table-" + i);
      if (tableBox) div.append(tableBox);
      const method = r.table && methodSentence(r.table);
      if (method) div.append(el("p", { class: "meta method" }, method));
      const plots = $("plots-" + i);
      if (plots && plots.content.childElementCount) {
        const p = el("div", { class: "plots" });
        // The plots are drawn from every row: a table filter says it does
        // not reach them (L9).
        const unfiltered = el("p", { class: "notice plots-unfiltered", hidden: "" });
        if (tableBox) {
          tableBox.addEventListener("filtered", (ev) => {
            unfiltered.hidden = !ev.detail.length;
            unfiltered.textContent = `The plots below show every row: the table's filter (${ev.detail.join(", ")}) applies to the table only.`;
          });
        }
        p.append(unfiltered, plots.content.cloneNode(true));
        div.append(p);
      }
      if (r.compare) {
        // Which intervals the rows have, from the rows themselves.
        const kinds = { paired: "paired over the processes that measured both", repetitions: "Welch's over repetitions", "within-run": "within-run, from one run's batches" };
        const at = r.compare.names.indexOf("interval");
        const seen = at < 0 ? [] : [...new Set(r.compare.rows.map((row) => row[at]).filter((k) => kinds[k]))];
        div.append(el("h4", { class: "compare-heading" }, seen.length ? `Comparison (95 % intervals: ${seen.map((k) => kinds[k]).join("; ")})` : "Comparison"));
        div.append(table(r.compare, 0, "compare-" + i));
      }
      box.append(div);
    });
  }

  // ---- Findings: each report's comparisons, one sentence each ----------------
  function findings() {
    const box = $("findings");
    // Findings grouped by report (N14): the report's title once, each
    // comparison with its metric in words and how many runs it rests on.
    const LABELS = { "latency_ms.median": "median latency", "latency_ms.mean": "mean latency", "latency_ms.p99": "p99 latency",
      "throughput_images_per_s": "throughput", "stages_ms.forward": "forward-pass time", "time_ms.median": "median time",
      "kernel_count": "kernel count", "gpu_utilization": "GPU utilization" };
    const groups = [];
    for (const r of data.reports) {
      if (!r.compare || !r.compare_of) continue;
      const items = [];
      const [param, base, metric] = r.compare_of;
      const t = r.compare, col = (n) => t.names.indexOf(n);
      const at = col("baseline"), p = col(param);
      for (const row of t.rows) {
        const ratio = parseFloat(row[col("ratio")]), lo = parseFloat(row[col("ci95_low")]), hi = parseFloat(row[col("ci95_high")]);
        if (!isFinite(ratio)) continue;
        const others = t.names.slice(0, at).map((n, j) => [n, row[j]]).filter(([n]) => n !== param).map(([n, v]) => `${n}=${v}`).join(", ");
        const holdsOne = isFinite(lo) && isFinite(hi) && lo <= 1 && 1 <= hi;
        // The verdict the report wrote (`crate::stats::verdict`): `same`
        // only where the interval lies within the margin, `inconclusive`
        // where it holds 1 and reaches beyond it.
        const written = col("verdict") >= 0 ? String(row[col("verdict")] || "") : "";
        const words = { faster: "faster", slower: "slower", same: "the same within the margin", inconclusive: "inconclusive (the interval holds 1 and reaches beyond the margin)" };
        const verdict = !isFinite(lo) ? "no interval" : words[written] || (holdsOne ? "no difference shown (the interval holds 1)" : ratio > 1 ? "higher" : "lower");
        // Measured together: the interval is of the per-process ratios, and
        // narrow enough to want three decimals.
        const paired = col("interval") >= 0 && row[col("interval")] === "paired";
        const digits = paired ? 3 : 2;
        const interval = isFinite(lo) ? ` [${lo.toFixed(digits)}, ${hi.toFixed(digits)}]` : "";
        const reps = col("reps_value") >= 0 ? row[col("reps_value")] : "";
        const repsBase = col("reps_baseline") >= 0 ? row[col("reps_baseline")] : "";
        const runs = paired || !reps ? "" : ` (${reps} vs ${repsBase} run${repsBase === "1" ? "" : "s"})`;
        const note = col("note") >= 0 ? String(row[col("note")] || "") : "";
        let how = "";
        if (paired) {
          how = ` Measured together: both in each of ${reps} processes, the interval over their per-process ratios.`;
          // The report's F test against the block's A/A check, where it has one.
          const aa = note.match(/spread ([0-9.]+) times the A\/A check's \(F test p = ([^)]+)\)/);
          if (aa) {
            const f = Number(aa[1]);
            const times = f >= 100 ? Math.round(f).toLocaleString("en-US") : f.toPrecision(3);
            how += ` Their per-process ratios spread ${times}× as much as the A/A check's in the same processes (F test p = ${aa[2]}): the process's speed moved them unequally, and the interval carries it.`;
          } else if (note.includes("moved these members unequally")) {
            how += " The process's speed moved them unequally, so pairing did not cancel it: the interval carries it.";
          }
        }
        items.push(el("li", { class: holdsOne ? "finding same" : "finding" },
          `${others ? others + ": " : ""}${LABELS[metric] || metric} at ${param} = ${p >= 0 ? row[p] : "?"} is ${ratio.toFixed(digits)}× its value at ${param} = ${base}${interval} — ${verdict}${runs}.${how}`));
      }
      if (items.length) {
        groups.push(el("div", { class: "finding-group" },
          el("h3", {}, r.title, r.stale.length ? " " : null,
            r.stale.length ? el("span", { class: "badge stale", title: "the report is stale: see it under Reports" }, "stale") : null),
          el("ul", { class: "findings" }, ...items)));
      }
    }
    if (!groups.length) return;
    box.append(el("section", { id: "findings-box" }, el("h2", {}, "Findings"),
      el("p", { class: "meta" }, "Each report's comparisons, with their 95 % intervals."),
      ...groups));
  }

  // ---- Comparison (`vitgraph report --compare A B`) ------------------------
  // Each row's B / A interval drawn against 1 and the threshold band, on one
  // scale for the whole table.
  // On a log scale: a ratio of 2 and one of 0.5 lie as far from 1, and the
  // margin band [1/(1+m), 1+m] is symmetric about it.
  function intervalSvg(iv, lo, hi, thr) {
    const [r, a, b] = iv;
    const W = 120, H = 14, x = (v) => (Math.log(v / lo) / Math.log(hi / lo)) * W;
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("class", "ci");
    const add = (tag, at) => { const e = document.createElementNS(svg.namespaceURI, tag); for (const k in at) e.setAttribute(k, at[k]); svg.append(e); };
    add("rect", { x: x(1 / (1 + thr)), y: 0, width: Math.max(1, x(1 + thr) - x(1 / (1 + thr))), height: H, class: "ci-band" });
    add("line", { x1: x(1), x2: x(1), y1: 0, y2: H, class: "ci-one" });
    if (a !== null && b !== null) add("line", { x1: x(a), x2: x(b), y1: H / 2, y2: H / 2, class: "ci-bar" });
    if (r !== null) add("circle", { cx: x(r), cy: H / 2, r: 3, class: "ci-point" });
    return svg;
  }
  function comparison() {
    const c = data.compare, box = $("compare-box");
    if (!c || !box) return;
    box.append(...c.sides.map((s) => el("p", { class: "meta compare-side" }, s)), el("p", { class: "meta" }, c.method));
    const ends = c.intervals.flatMap(([r, a, b]) => [r, a, b]).filter((v) => v !== null && v > 0);
    const lo = Math.min(1 / (1 + 2 * c.threshold), ...ends), hi = Math.max(1 + 2 * c.threshold, ...ends);
    const t = table(c.table, 2, "compare-table");
    // Verdicts coloured; the interval drawn beside the ratio. A row is its
    // metric and configuration.
    const index = new Map(c.table.rows.map((r, i) => [r[1] + "\u0000" + r[2], i]));
    for (const tr of t.querySelectorAll("tbody tr")) {
      const cells = JSON.parse(tr.dataset.cells);
      const verdict = cells[0].split(":")[0].replace(" ", "-");
      tr.children[0].replaceChildren(el("span", { class: "badge verdict " + verdict }, cells[0]));
      // A long configuration wraps after its `[` and commas.
      tr.children[2].replaceChildren(...cells[2].split(/(?<=[[,])/).flatMap((p) => [p, el("wbr", {})]).slice(0, -1));
      const i = index.get(cells[1] + "\u0000" + cells[2]);
      if (i !== undefined) tr.children[5].append(" ", intervalSvg(c.intervals[i], lo, hi, c.threshold));
    }
    box.append(t, ...c.summary.map((l) => el("p", { class: "meta compare-summary" }, l)));
    if (c.kernels.length) {
      box.append(el("h3", {}, `Kernel diffs (${c.kernels.length} analysed configuration${c.kernels.length === 1 ? "" : "s"})`));
      c.kernels.forEach((k, i) => {
        const d = el("details", { class: "kernel-diff", id: "kernel-diff-" + i }, el("summary", {}, k.config + " — " + (k.lines[0] || "")));
        d.addEventListener("toggle", () => {
          if (!d.open || d.dataset.drawn) return;
          d.dataset.drawn = "1";
          d.append(el("ul", { class: "reasons" }, ...k.lines.slice(1).map((l) => el("li", {}, l))));
          if (k.table.rows.length) d.append(table(k.table, 1, "kernel-table-" + i));
        });
        box.append(d);
      });
    }
  }

  // ---- Nodes --------------------------------------------------------------
  function show(i) {
    const n = data.nodes[i], d = data.details[i];
    const box = $("node-detail");
    const dl = el("dl", {});
    const row = (k, v) => { if (v !== undefined && v !== null && v !== "") dl.append(el("dt", {}, k), el("dd", {}, v)); };
    row("node", n[0]);
    row("stage", data.stages[n[1]].name);
    row("state", el("span", { class: "badge " + n[2] }, n[2]));
    if (d.elsewhere) row("measured elsewhere", el("span", { class: "elsewhere" }, d.elsewhere));
    if (d.reasons && d.reasons.length) row("stale because", el("ul", { class: "reasons" }, ...d.reasons.map((r) => el("li", {}, r))));
    row("params", Object.keys(d.params).length ? Object.entries(d.params).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`).join(", ") : "(none)");
    row("current run", d.started ? `started ${new Date(d.started * 1000).toISOString().replace("T", " ").slice(0, 19)} UTC, took ${fmtMs(d.duration_ms)}` : "none");
    if (d.attempt) {
      const a = d.attempt;
      const how = a.exit_code !== null && a.exit_code !== undefined ? `, exit status ${a.exit_code}` : (a.signal ? `, killed by signal ${a.signal}` : "");
      // The failure's kind in words (as stored: `start`, `outputs`, …).
      const KINDS = { exit: "exited with an error", signal: "killed by a signal", outputs: "a declared output missing", transient: "a transient failure (retried)",
        start: "could not start", store: "the store could not record it", damaged: "a stored run could not be restored", input_changed: "an input changed while it ran",
        key: "its key could not be computed", resources: "resources this build lacks", not_built: "an upstream node not built", interrupted: "interrupted",
        memory: "out of memory", time: "out of time", cancelled: "cancelled", detached: "left running on the cluster" };
      const kind = how === "" && a.kind ? " · " + (KINDS[a.kind] || a.kind) : "";
      row("last attempt", el("span", { class: "attempt-line" }, el("span", { class: "badge failed" }, a.status), ` started ${a.started}${kind}${how}`));
      if (a.command) row("command", el("code", { class: "attempt-command" }, a.command));
      if (a.error) row("error", el("pre", { class: "log attempt-error" }, a.error));
    }
    if (d.files && d.files.length) {
      row("files", el("ul", { class: "reasons" }, ...d.files.map(([name, size, href]) => el("li", {}, el("a", { href }, name), ` (${size} B)`))));
    }
    box.replaceChildren(el("h3", {}, n[0]), dl);
    if (d.measure) box.append(...measurement(d.measure));
    for (const dev of d.kernels || []) {
      box.append(el("h4", {}, `Top kernels, GPU ${dev.device} (by time in the analysed window)`),
        el("table", { class: "kernels" },
          el("tr", {}, ...["kernel", "time %", "total", "count", "mean"].map((h) => el("th", {}, h))),
          ...dev.kernels.map(([name, pct, total, count, mean]) => el("tr", {},
            el("td", { class: "kname", title: name }, name.length > 90 ? name.slice(0, 87) + "…" : name),
            el("td", { class: "num" }, pct.toFixed(1)),
            el("td", { class: "num" }, fmtNs(total)),
            el("td", { class: "num" }, String(count)),
            el("td", { class: "num" }, fmtNs(mean))))));
    }
    if (d.tracks) box.append(...windowTracks(d.tracks, (d.files || []).find((f) => f[0] === "window.perfetto.json"), d.perfetto));
    if (d.key && Object.keys(d.key).length) box.append(el("h4", {}, "Key parts"), el("pre", {}, JSON.stringify(d.key, null, 1)));
    if (d.env !== undefined) box.append(el("h4", {}, "Environment"), el("pre", {}, JSON.stringify(data.envs[d.env], null, 1)));
    if (d.log) box.append(el("h4", {}, "Log (last lines)"), el("pre", { class: "log" }, d.log));
    box.scrollIntoView({ block: "nearest" });
    box.tabIndex = -1;
    box.focus({ preventScroll: true });
  }
  // A measuring run: its verdict, each batch's latency in order (left-out
  // batches in red), and the GPU's SM clock and temperature over the window.
  const SVG = "http://www.w3.org/2000/svg";
  const svgEl = (tag, attrs, ...kids) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  };
  function strip(label, unit, lines, cls) {
    const W = 640, H = 70, L = 60;
    const all = lines.flatMap((l) => l.points.map((p) => p[1]));
    const svg = svgEl("svg", { class: "strip " + cls, viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": label });
    if (!all.length) return svg;
    let lo = Math.min(...all), hi = Math.max(...all);
    if (hi === lo) { hi += 1; lo -= 1; }
    const xs = lines.flatMap((l) => l.points.map((p) => p[0]));
    const x0 = Math.min(...xs), x1 = Math.max(...xs) === x0 ? x0 + 1 : Math.max(...xs);
    const X = (x) => L + (x - x0) / (x1 - x0) * (W - L - 4), Y = (y) => H - 12 - (y - lo) / (hi - lo) * (H - 20);
    svg.append(svgEl("text", { x: 2, y: 12, class: "lab" }, label), svgEl("text", { x: 2, y: 26, class: "tick" }, fmtNum(hi) + " " + unit), svgEl("text", { x: 2, y: H - 12, class: "tick" }, fmtNum(lo) + " " + unit));
    for (const l of lines) {
      if (l.dots) for (const p of l.points) svg.append(svgEl("circle", { cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: p[2] ? 2.5 : 1.5, class: p[2] ? "excluded" : l.cls }, svgEl("title", {}, `${p[2] ? "left out (throttled) " : ""}${fmtNum(p[1])} ${unit}`)));
      else svg.append(svgEl("polyline", { points: l.points.map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(" "), class: l.cls }));
    }
    return svg;
  }
  function fmtNum(v) { return Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3); }
  function measurement(m) {
    // A block measured together: one measurement per member.
    if (m.members) return m.members.flatMap((one) => measurement1(one, `Measurement: ${one.key}`));
    return measurement1(m, "Measurement");
  }
  function measurement1(m, title) {
    const out = [el("h4", {}, title)];
    if (m.verdict) out.push(el("p", { class: "verdict" }, el("span", { class: "badge " + (m.verdict === "valid" ? "fresh" : "failed") }, m.verdict), " ", (m.flags || []).join("; ")));
    if (m.lat && m.lat.length) {
      const points = m.lat.map(([v, x], i) => [i * m.every, v, x]);
      out.push(el("div", { class: "strips" }, strip(`latency of ${m.batches} batches${m.every > 1 ? ` (every ${m.every}th)` : ""}`, "ms", [{ points, dots: true, cls: "lat" }], "latency")));
    }
    if (m.series && m.series.length) {
      out.push(el("div", { class: "strips" },
        strip("SM clock", "MHz", [{ points: m.series.map((s) => [s[0], s[1], s[3]]), dots: true, cls: "sm" }], "clock"),
        strip("temperature", "°C", [{ points: m.series.map((s) => [s[0], s[2]]), cls: "temp" }], "temperature")));
    } else if (m.source) out.push(el("p", { class: "meta" }, `GPU telemetry: ${m.source}`));
    return out;
  }
  function fmtNs(ns) {
    if (ns >= 1e6) return (ns / 1e6).toPrecision(3) + " ms";
    if (ns >= 1e3) return (ns / 1e3).toPrecision(3) + " µs";
    return Math.round(ns) + " ns";
  }
  function fmtMs(ms) {
    if (ms === undefined || ms === null) return "";
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    return Math.floor(ms / 60000) + " min " + String(Math.floor((ms % 60000) / 1000)).padStart(2, "0") + " s";
  }
  function nodes() {
    const box = $("node-browser");
    const q = el("input", { type: "search", placeholder: "filter by id", id: "node-search" });
    const st = el("select", { id: "node-stage" }, el("option", { value: "" }, "every stage"), ...data.stages.map((s, i) => el("option", { value: i }, s.name)));
    const state = el("select", { id: "node-state" }, ...["", "fresh", "stale", "never-built", "failed", "running", "not-needed"].map((s) => el("option", { value: s }, s || "every state")));
    const list = el("table", { id: "node-list" });
    const more = el("p", { class: "meta" });
    const LIMIT = 200;
    function draw() {
      const text = q.value.toLowerCase();
      const hits = [];
      data.nodes.forEach((n, i) => {
        if (text && !n[0].toLowerCase().includes(text)) return;
        if (st.value !== "" && String(n[1]) !== st.value) return;
        if (state.value && n[2] !== state.value) return;
        hits.push(i);
      });
      list.replaceChildren(el("tr", {}, el("th", {}, "node"), el("th", {}, "state"), el("th", {}, "last run")),
        ...hits.slice(0, LIMIT).map((i) => {
          const n = data.nodes[i];
          return el("tr", {}, pressable(el("td", { class: "id" }, n[0]), () => show(i)), el("td", {}, el("span", { class: "badge " + n[2] }, n[2])), el("td", { class: "num" }, fmtMs(n[3])));
        }));
      more.textContent = hits.length > LIMIT ? `${LIMIT} of ${hits.length} shown; narrow the filter to see the others.` : `${hits.length} node(s).`;
    }
    for (const c of [q, st, state]) c.addEventListener("input", draw);
    box.append(q, st, state, more, list, el("div", { id: "node-detail" }));
    draw();
    // A stage's box in the graph lists the stage's nodes.
    for (const g of document.querySelectorAll("#stage-graph g.stage")) {
      g.setAttribute("role", "button");
      pressable(g, () => {
        st.value = g.dataset.i;
        q.value = "";
        state.value = "";
        draw();
        box.scrollIntoView({ block: "start" });
      });
    }
  }

  // Analysis notebooks (`Notebook` nodes): their executed HTML and .ipynb,
  // with their state, under the reports.
  function notebooks() {
    const rows = [];
    data.nodes.forEach((n, i) => {
      if (data.stages[n[1]].kind !== "Notebook") return;
      const files = data.details[i].files || [];
      const links = files.filter(([name]) => name.endsWith(".html") || name.endsWith(".ipynb"));
      const id = el("a", { class: "node-link", href: "#node-detail", title: "open this node's details" }, n[0]);
      rows.push(el("li", {}, pressable(id, (ev) => { ev.preventDefault(); show(i); }), " ", el("span", { class: "badge " + n[2] }, n[2]), " ",
        ...(links.length ? links.flatMap(([name, , href], k) => [k ? " · " : "", el("a", { href }, name)]) : [el("span", { class: "meta" }, "not built")])));
    });
    if (!rows.length) return;
    $("notebook-list").append(el("h3", {}, "Notebooks"), el("ul", { class: "notebooks" }, ...rows));
  }

  findings();
  stages();
  timeline();
  comparison();
  reports();
  notebooks();
  nodes();
  document.body.dataset.ready = "1";
})();
