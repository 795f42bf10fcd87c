// Small SVG charts built with DOM calls only (createElementNS + textContent): no HTML strings, no
// third-party code, nothing fetched from elsewhere. Exposes window.Charts.
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563",
    "#65a30d", "#9333ea"];
  // A series keeps its colour for the life of the page, whatever order a refresh lists the series in.
  const COLOURS = new Map();
  function colorOf(name) {
    if (!COLOURS.has(name)) COLOURS.set(name, PALETTE[COLOURS.size % PALETTE.length]);
    return COLOURS.get(name);
  }

  function el(name, attrs, text) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
    if (a >= 1) return v.toFixed(2);
    if (a === 0) return "0";
    if (a >= 0.001) return v.toFixed(3);
    return v.toExponential(0);
  }

  function timeLabel(sec, span) {
    const d = new Date(sec * 1000);
    const iso = d.toISOString();
    return span > 2 * 86400 ? iso.slice(5, 10) : span > 600 ? iso.slice(11, 16) : iso.slice(11, 19);
  }

  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / n;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(t);
    return out;
  }

  function logTicks(lo, hi) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      const t = Math.pow(10, e);
      if (t >= lo * 0.999 && t <= hi * 1.001) out.push(t);
    }
    return out.length ? out : [lo, hi];
  }

  // series: [{name, points: [[x, y], ...], kind: "line"|"dots", color}]
  // opts: {xTime, logX, logY, yMin, yMax, height, xLabel, yLabel}
  function plot(container, series, opts) {
    opts = opts || {};
    container.replaceChildren();
    const W = 460, H = opts.height || 200, L = 46, R = 10, T = 8, B = 34;
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
    const pts = series.flatMap((s) => s.points).filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1])
      && (!opts.logX || p[0] > 0) && (!opts.logY || p[1] > 0));
    if (!pts.length) {
      svg.appendChild(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no data yet"));
      container.appendChild(svg);
      return svg;
    }
    let x0 = Math.min(...pts.map((p) => p[0])), x1 = Math.max(...pts.map((p) => p[0]));
    let y0 = opts.yMin !== undefined ? opts.yMin : Math.min(...pts.map((p) => p[1]));
    let y1 = opts.yMax !== undefined ? opts.yMax : Math.max(...pts.map((p) => p[1]));
    if (x1 === x0) { x0 -= opts.logX ? x0 / 2 : 1; x1 += opts.logX ? x1 : 1; }
    if (y1 === y0) { y0 = opts.logY ? y0 / 2 : y0 - 1; y1 = opts.logY ? y1 * 2 : y1 + 1; }
    const tx = opts.logX ? Math.log10 : (v) => v, ty = opts.logY ? Math.log10 : (v) => v;
    const sx = (v) => L + ((tx(v) - tx(x0)) / (tx(x1) - tx(x0))) * (W - L - R);
    const sy = (v) => H - B - ((ty(v) - ty(y0)) / (ty(y1) - ty(y0))) * (H - T - B);
    const axes = el("g", { class: "axes" });
    const yt = opts.logY ? logTicks(y0, y1) : niceTicks(y0, y1, 4);
    for (const t of yt) {
      axes.appendChild(el("line", { x1: L, x2: W - R, y1: sy(t), y2: sy(t), class: "grid" }));
      axes.appendChild(el("text", { x: L - 4, y: sy(t) + 3, "text-anchor": "end" }, fmt(t)));
    }
    const xt = opts.logX ? logTicks(x0, x1) : niceTicks(x0, x1, 4);
    for (const t of xt) {
      axes.appendChild(el("text", { x: sx(t), y: H - B + 13, "text-anchor": "middle" },
        opts.xTime ? timeLabel(t, x1 - x0) : fmt(t)));
    }
    axes.appendChild(el("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
    axes.appendChild(el("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
    if (opts.xLabel) axes.appendChild(el("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "label" }, opts.xLabel));
    svg.appendChild(axes);
    series.forEach((s, i) => {
      const color = s.color || colorOf(s.name);
      const ps = s.points.filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1])
        && (!opts.logX || p[0] > 0) && (!opts.logY || p[1] > 0));
      if (!ps.length) return;
      if (s.kind === "dots" || ps.length === 1) {
        const g = el("g", { fill: color, "data-series": s.name });
        for (const p of ps) g.appendChild(el("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.6 }));
        svg.appendChild(g);
      } else {
        const d = ps.map((p, j) => `${j ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
        svg.appendChild(el("path", { d, stroke: color, fill: "none", "stroke-width": s.width || 1.8,
          "stroke-dasharray": s.dash || "none", "data-series": s.name }));
      }
    });
    container.appendChild(svg);
    container.appendChild(legend(series));
    return svg;
  }

  function legend(series) {
    const box = document.createElement("div");
    box.className = "legend";
    series.forEach((s, i) => {
      const item = document.createElement("span");
      const sw = document.createElement("i");
      sw.style.background = s.color || colorOf(s.name);
      item.appendChild(sw);
      item.appendChild(document.createTextNode(s.name));
      box.appendChild(item);
    });
    return box;
  }

  // bars: [{label, value}]
  function bars(container, items, opts) {
    opts = opts || {};
    container.replaceChildren();
    const W = 460, H = opts.height || 200, L = 46, R = 10, T = 8, B = 34;
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
    if (!items.length) {
      svg.appendChild(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no data yet"));
      container.appendChild(svg);
      return svg;
    }
    const max = Math.max(...items.map((b) => b.value), 1);
    const bw = (W - L - R) / items.length;
    for (const t of niceTicks(0, max, 4)) {
      const y = H - B - (t / max) * (H - T - B);
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: y, y2: y, class: "grid" }));
      svg.appendChild(el("text", { x: L - 4, y: y + 3, "text-anchor": "end", class: "tick" }, fmt(t)));
    }
    items.forEach((b, i) => {
      const h = (b.value / max) * (H - T - B);
      const x = L + i * bw + bw * 0.12;
      const rect = el("rect", { x, y: H - B - h, width: bw * 0.76, height: Math.max(h, 0.5), class: "bar" });
      rect.appendChild(el("title", {}, `${b.label}: ${fmt(b.value)}`));
      svg.appendChild(rect);
      svg.appendChild(el("text", { x: x + bw * 0.38, y: H - B + 13, "text-anchor": "middle", class: "tick" }, b.label));
      svg.appendChild(el("text", { x: x + bw * 0.38, y: H - B - h - 3, "text-anchor": "middle", class: "val" }, fmt(b.value)));
    });
    if (opts.xLabel) svg.appendChild(el("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "label" }, opts.xLabel));
    container.appendChild(svg);
    return svg;
  }

  window.Charts = { plot, bars, fmt, PALETTE };
})();
