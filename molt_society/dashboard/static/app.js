// The dashboard page: builds the panels from /api/panels, then redraws them on every snapshot pushed by
// /api/stream (server-sent events). Agent-written text (titles, bodies, agent and submolt names, dead-letter
// reasons) is only ever assigned as text (text nodes, textContent); no markup is ever parsed from a string.
"use strict";
(function () {
  const { plot, bars, fmt } = window.Charts;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const stats = { snapshots: 0, renderMs: [], lastSeq: 0, errors: 0 };
  window.__dashboard = stats; // read by the end-to-end test and the benchmark

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else if (/html|^on/i.test(k)) throw new Error(`refusing to set ${k}`);
      else node[k] = v;
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return node;
  }

  // Times arrive as ISO 8601 strings; charts want Unix seconds.
  const ts = (v) => (typeof v === "string" ? Date.parse(v) / 1000 : v);

  function rows(panel, name) {
    const q = panel && panel.queries[name];
    return q && q.rows ? q.rows : null;
  }

  function ago(epochSec) {
    if (!epochSec) return "never";
    const s = Math.max(0, Date.now() / 1000 - epochSec);
    return s < 60 ? `${s.toFixed(0)} s ago` : s < 3600 ? `${(s / 60).toFixed(0)} min ago` : `${(s / 3600).toFixed(1)} h ago`;
  }

  function clock(epochSec) {
    return epochSec ? new Date(epochSec * 1000).toISOString().slice(11, 19) + " UTC" : "–";
  }

  // --- layout -----------------------------------------------------------------------------------------
  const bodies = {};

  function buildPanels(meta) {
    const main = $("#panels");
    main.replaceChildren();
    for (const p of meta.panels) {
      const sqlBox = h("div", { class: "sql", hidden: true });
      for (const q of p.queries) {
        sqlBox.appendChild(h("div", { class: "sql-name" }, q.name, h("span", { class: "ms", "data-ms": q.name })));
        sqlBox.appendChild(h("pre", {}, q.sql));
      }
      for (const src of p.extra_sources) sqlBox.appendChild(h("p", { class: "src" }, src));
      const btn = h("button", { type: "button", class: "sql-btn", title: "show the SQL behind this panel" }, "SQL");
      btn.addEventListener("click", () => {
        sqlBox.hidden = !sqlBox.hidden;
        btn.classList.toggle("on", !sqlBox.hidden);
      });
      const body = h("div", { class: "body" });
      const section = h("section", { class: `panel panel-${p.id}`, id: `panel-${p.id}`, "data-panel": p.id, "data-state": "loading" },
        h("div", { class: "head" }, h("h2", {}, p.title), h("span", { class: "qms" }), btn),
        h("p", { class: "desc" }, p.description),
        sqlBox,
        h("div", { class: "err", hidden: true }),
        body);
      main.appendChild(section);
      bodies[p.id] = { section, body, parts: {} };
    }
  }

  function part(id, name, cls) {
    const b = bodies[id];
    if (!b.parts[name]) {
      b.parts[name] = h("div", { class: `part ${cls || ""}`, "data-part": name });
      b.body.appendChild(b.parts[name]);
    }
    return b.parts[name];
  }

  function markPanel(id, panel, hasData) {
    const b = bodies[id];
    const errors = Object.entries(panel.queries).filter(([, q]) => q.error).map(([n, q]) => `${n}: ${q.error}`);
    const err = $(".err", b.section);
    err.hidden = !errors.length;
    err.textContent = errors.length ? `query failed: ${errors.join("; ")}` : "";
    const ms = Object.values(panel.queries).map((q) => q.ms || 0);
    $(".qms", b.section).textContent = ms.length ? `${Math.max(...ms).toFixed(0)} ms` : "";
    for (const [n, q] of Object.entries(panel.queries)) {
      const slot = b.section.querySelector(`[data-ms="${n}"]`);
      if (slot) slot.textContent = q.ms !== null && q.ms !== undefined ? ` (${q.ms.toFixed(0)} ms)` : "";
    }
    b.section.dataset.state = errors.length && !hasData ? "error" : hasData ? "ok" : "empty";
  }

  function kpis(container, items) {
    container.replaceChildren(...items.map(([label, value, id, raw]) =>
      h("div", { class: "kpi" },
        h("div", { class: "v", "data-kpi": id, "data-value": raw === undefined || raw === null ? "" : String(raw) }, value),
        h("div", { class: "l" }, label))));
  }

  function table(container, head, data) {
    const t = h("table", {}, h("thead", {}, h("tr", {}, ...head.map((c) => h("th", {}, c)))));
    const tb = h("tbody");
    for (const r of data) tb.appendChild(h("tr", {}, ...r.map((c) => h("td", {}, c === null || c === undefined ? "–" : String(c)))));
    t.appendChild(tb);
    container.replaceChildren(t);
  }

  function bySeries(rs, key, yKey, xKey) {
    const m = new Map();
    for (const r of rs) {
      const k = typeof key === "function" ? key(r) : r[key];
      if (!m.has(k)) m.set(k, []);
      m.get(k).push([ts(r[xKey || "t"]), r[yKey || "value"]]);
    }
    for (const v of m.values()) v.sort((a, b) => a[0] - b[0]);
    return m;
  }

  // --- panels -----------------------------------------------------------------------------------------
  function renderActivity(p, health) {
    const tot = rows(p, "totals"), rate = rows(p, "rate"), win = rows(p, "windows");
    const t = tot && tot[0] ? tot[0] : {};
    // stored in the 10 s up to now (ClickHouse's clock), not up to the newest stored event: a society
    // that stopped storing shows 0, not its last rate
    const fr = (rows(health, "freshness") || [])[0] || {};
    const last10 = fr.events_per_s_10s === undefined ? null : fr.events_per_s_10s;
    kpis(part("activity", "kpis", "kpis"), [
      ["events", fmt(t.events), "events", t.events],
      ["active agents (posted, commented or voted)", fmt(t.agents), "agents", t.agents],
      ["posts", fmt(t.posts), "posts", t.posts], ["comments", fmt(t.comments), "comments", t.comments],
      ["votes", fmt(t.votes), "votes", t.votes],
      ["events/s stored (last 10 s to now)", fmt(last10), "rate", last10],
      ["society time", t.events && t.society_time ? String(t.society_time).slice(0, 19).replace("T", " ") : "–", "society_time"],
    ]);
    const types = bySeries(rate || [], "type", "events", "second");
    const rateSeries = [...types.entries()].map(([name, points]) => ({ name, points }));
    const c1 = part("activity", "rate-chart", "chart-box");
    plot(c1, rateSeries, { xTime: true, yMin: 0, xLabel: "events stored per second, by type (wall clock)" });
    const ws = bySeries(win || [], "metric");
    plot(part("activity", "agents-chart", "chart-box"), [
      { name: "active agents", points: ws.get("active_agents") || [] },
      { name: "new agents", points: ws.get("new_agents") || [] },
    ], { xTime: true, yMin: 0, xLabel: "per event-time window" });
    markPanel("activity", p, Boolean(t.events));
  }

  function renderThreads(p) {
    const d = rows(p, "depth") || [], s = rows(p, "series") || [];
    bars(part("threads", "depth-chart", "chart-box"), d.map((r) => ({ label: String(r.depth), value: r.posts })),
      { xLabel: "reply depth of a post's thread (0 = no comment)" });
    const ser = bySeries(s, (r) => (r.metric === "mean_depth" ? `mean depth (${r.dim})` : "share with no comment"));
    plot(part("threads", "series-chart", "chart-box"), [...ser.entries()].map(([name, points]) => ({ name, points })),
      { xTime: true, yMin: 0, xLabel: "per event-time window" });
    const lastShare = (ser.get("share with no comment") || []).slice(-1)[0];
    kpis(part("threads", "kpis", "kpis"), [
      ["posts with no comment", lastShare ? (100 * lastShare[1]).toFixed(1) + "%" : "–", "share_no_comment"],
      ["deepest reply", d.length ? String(Math.max(...d.map((r) => r.depth))) : "–", "max_depth"],
    ]);
    markPanel("threads", p, d.length > 0);
  }

  function renderCascades(p, fitLine) {
    const c = rows(p, "ccdf") || [], f = rows(p, "fit") || [];
    const fit = Object.fromEntries(f.map((r) => [r.dim, r.value]));
    plot(part("cascades", "ccdf-chart", "chart-box"), [
      { name: "observed P(S ≥ s)", points: c.map((r) => [r.size, r.ccdf]), kind: "dots", color: "#2563eb" },
      { name: fit.alpha ? `power law, alpha ${fit.alpha.toFixed(2)}` : "power law (no fit yet)", points: fitLine || [], dash: "5 3", color: "#dc2626" },
    ], { logX: true, logY: true, xLabel: "cascade size s (comments in a thread), log-log" });
    kpis(part("cascades", "kpis", "kpis"), [
      ["alpha", fit.alpha ? fit.alpha.toFixed(3) : "–", "alpha", fit.alpha],
      ["± sigma", fit.sigma ? fit.sigma.toFixed(3) : "–", "sigma"],
      ["xmin", fit.xmin ? fmt(fit.xmin) : "–", "xmin"],
      ["cascades in tail", fit.n_tail ? fmt(fit.n_tail) : "–", "n_tail"],
      ["KS distance", fit.ks !== undefined ? fit.ks.toFixed(3) : "–", "ks"],
    ]);
    markPanel("cascades", p, c.length > 0);
  }

  function renderInfluence(p) {
    const s = rows(p, "series") || [], lead = rows(p, "leaders") || [];
    const ser = bySeries(s, (r) => (r.metric === "topk_churn" ? "top-k churn" : `PageRank share ${r.dim}`));
    const order = [...ser.keys()].sort();
    plot(part("influence", "share-chart", "chart-box"), order.map((name) => ({ name, points: ser.get(name) })),
      { xTime: true, yMin: 0, yMax: 1, xLabel: "per event-time window" });
    const box = part("influence", "leaders", "table-box");
    table(box, ["#", "agent", "PageRank"], lead.map((r) => [r.rank, r.agent, r.pagerank.toFixed(4)]));
    markPanel("influence", p, s.length > 0);
  }

  function renderContent(p) {
    const hot = rows(p, "hot") || [];
    // thread: [comment_id, parent_id, depth, actor, content, occurred_at] per comment
    const byPost = new Map(hot.map((post) => [post.post_id, (post.thread || []).map((c) =>
      ({ comment_id: c[0], parent_id: c[1], depth: c[2], actor: c[3], content: c[4] }))]));
    const list = h("ol", { class: "hot" });
    for (const post of hot) {
      const comments = byPost.get(post.post_id) || [];
      const thread = h("ul", { class: "thread" });
      for (const c of comments) {
        const li = h("li", { class: `depth-${Math.min(c.depth, 5)}` }, h("b", {}, c.actor), " ", h("span", { class: "txt" }, c.content));
        thread.appendChild(li);
      }
      const details = h("details", {},
        h("summary", {},
          h("span", { class: "title" }, post.title || "(untitled)"),
          h("span", { class: "meta" }, ` by ${post.author} in ${post.submolt} · score ${post.score} · ${post.comments} comments`)),
        post.post_text ? h("p", { class: "post-body" }, post.post_text) : null,
        comments.length ? thread : h("p", { class: "muted" }, "no comments yet"),
        comments.length && comments.length < post.comments
          ? h("p", { class: "muted" }, `the first ${comments.length} of ${post.comments} comments`) : null);
      list.appendChild(h("li", { "data-post": post.post_id }, details));
    }
    const box = part("content", "hot", "wide");
    // Keep open threads open across refreshes.
    const open = new Set([...box.querySelectorAll("li[data-post] > details[open]")].map((d) => d.parentElement.dataset.post));
    for (const li of list.children) if (open.has(li.dataset.post)) $("details", li).open = true;
    box.replaceChildren(list);
    markPanel("content", p, hot.length > 0);
  }

  function renderHealth(p, health) {
    const dl = rows(p, "dead_letters") || [], recent = rows(p, "dead_recent") || [], fr = (rows(p, "freshness") || [])[0] || {};
    const b = health.broker, sink = health.sink, rp = health.replay;
    const lag = b && b.lag ? b.lag : {};
    const lagKnown = b && b.reachable;
    kpis(part("health", "kpis", "kpis"), [
      ["lag: stream workers", lagKnown ? fmt(lag.streams) : "unknown", "lag_streams", lagKnown ? lag.streams : null],
      ["lag: sink", lagKnown ? fmt(lag.sink) : "unknown", "lag_sink", lagKnown ? lag.sink : null],
      ["lag: agents", lagKnown ? fmt(lag.agents) : "unknown", "lag_agents", lagKnown ? lag.agents : null],
      ["dead letters", fmt(dl.reduce((a, r) => a + r.records, 0)), "dead_letters", dl.reduce((a, r) => a + r.records, 0)],
      ["sink insert p99", sink && sink.p99_insert_ms !== null ? `${fmt(sink.p99_insert_ms)} ms` : "–", "sink_p99"],
      ["last event stored", fr.ms_since_last_insert !== undefined && fr.ms_since_last_insert !== null && fr.ms_since_last_insert < 1e9
        ? `${(fr.ms_since_last_insert / 1000).toFixed(1)} s ago` : "–", "freshness"],
    ]);
    const rbox = part("health", "replay", "replay");
    if (rp && rp.total) {
      const pct = Math.min(100, (100 * rp.published) / rp.total);
      const bar = h("progress", { max: 100, value: pct });
      rbox.replaceChildren(h("div", {}, `replay of ${rp.source || "an archive"}: ${fmt(rp.published)} / ${fmt(rp.total)} events (${pct.toFixed(1)}%), ${fmt(rp.rate)} events/s${rp.done ? ", done" : ""}`), bar);
    } else {
      rbox.replaceChildren(h("div", { class: "muted" }, "no replay running for this society"));
    }
    table(part("health", "dead", "table-box"), ["code", "records", "last"], dl.map((r) => [r.code, r.records, String(r.last).slice(0, 19)]));
    const rec = part("health", "recent", "table-box");
    table(rec, ["received", "code", "reason"], recent.map((r) => [String(r.received_at).slice(0, 19), r.code, r.reason]));
    markPanel("health", p, true);
  }

  // A running society that stored nothing for this long is called stale (a live one stores every tick).
  const STALE_MS = 10000;
  function staleness(snap) {
    const fr = (rows(snap.panels.health, "freshness") || [])[0] || {};
    const ms = fr.ms_since_last_insert;
    if (!snap.running || ms === undefined || ms === null || ms < STALE_MS) return "";
    const since = ms < 1e9 ? `for ${fmt(Math.round(ms / 1000))} s` : "yet";
    return `Nothing stored ${since} although society ${snap.society} runs: its figures are not live ` +
      "(society status says which process is behind).";
  }

  function renderStatus(snap) {
    $("#society-name").textContent = snap.society;
    document.title = `society ${snap.society}`;
    const b = snap.health.broker;
    const pill = $("#broker"), banner = $("#banner");
    if (!b) {
      pill.textContent = "broker: not watched"; pill.className = "pill muted";
      banner.hidden = true;
    } else if (b.reachable === false) {
      pill.textContent = "broker unreachable"; pill.className = "pill bad";
      banner.hidden = false;
      banner.textContent = `Broker ${b.bootstrap} unreachable since ${clock(b.down_since)} (${b.error || "no answer"}). ` +
        "Figures from ClickHouse keep updating; consumer lag is unknown until it answers again.";
    } else if (b.reachable) {
      pill.textContent = "broker ok"; pill.className = "pill ok";
      banner.hidden = true;
    } else {
      pill.textContent = "broker: checking"; pill.className = "pill warn";
    }
    const stale = staleness(snap);
    if (stale) {
      banner.textContent = banner.hidden ? stale : `${banner.textContent} ${stale}`;
      banner.hidden = false;
    }
    const state = $("#state");
    if (state) {
      state.textContent = snap.running ? (stale ? "running, nothing stored lately" : "running") : "stored (not running)";
      state.className = snap.running ? (stale ? "pill bad" : "pill ok") : "pill muted";
    }
    const sink = snap.health.sink;
    if (sink && sink.failing) {
      const f = sink.failing;
      const text = `The sink has not been able to store events for ${fmt(Math.round(f.seconds))} s ` +
        `(${fmt(f.attempts)} tries; ${f.error || "no error text"}); the stack restarts it if this goes on.`;
      banner.textContent = banner.hidden ? text : `${banner.textContent} ${text}`;
      banner.hidden = false;
    }
    $("#updated").textContent = `updated ${clock(snap.generated_at)} · refresh ${fmt(snap.refresh_ms)} ms`;
  }

  function render(snap) {
    const t0 = performance.now();
    const P = snap.panels;
    renderStatus(snap);
    const steps = [
      () => renderActivity(P.activity, P.health), () => renderThreads(P.threads),
      () => renderCascades(P.cascades, P.cascades.fit_line), () => renderInfluence(P.influence),
      () => renderContent(P.content), () => renderHealth(P.health, snap.health),
    ];
    for (const step of steps) {
      try { step(); } catch (e) { stats.errors += 1; console.error(e); }
    }
    stats.snapshots += 1;
    stats.lastSeq = snap.seq;
    stats.renderMs.push(performance.now() - t0);
    if (stats.renderMs.length > 500) stats.renderMs.shift();
    document.body.dataset.seq = String(snap.seq);
  }

  // --- live stream ------------------------------------------------------------------------------------
  function connect() {
    const conn = $("#conn");
    const es = new EventSource("/api/stream");
    es.addEventListener("open", () => { conn.textContent = "dashboard connected"; conn.className = "pill ok"; });
    es.addEventListener("error", () => { conn.textContent = "reconnecting to the dashboard…"; conn.className = "pill bad"; });
    es.addEventListener("snapshot", (ev) => {
      conn.textContent = "dashboard connected"; conn.className = "pill ok";
      render(JSON.parse(ev.data));
    });
  }

  async function start() {
    for (;;) {
      try {
        const resp = await fetch("/api/panels");
        if (resp.ok) { buildPanels(await resp.json()); break; }
      } catch (e) { /* the server is not up yet */ }
      await new Promise((r) => setTimeout(r, 1000));
    }
    connect();
  }
  start();
})();
