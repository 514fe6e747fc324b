// The status page of a Spindle job: polls status.json (relative, so
// that it works behind YARN's web proxy) and draws it with uPlot.
(function () {
  "use strict";
  var POLL_MS = 2000;
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var polls = 0, draws = 0;
  var charts = {};

  function $(id) { return document.getElementById(id); }

  // draw shows data (uPlot's columns, x first) in the figure id; a chart
  // is made anew when key (its series) changes.
  function draw(id, key, opts, data) {
    var fig = $(id), el = fig.querySelector(".plot");
    var width = Math.max(el.clientWidth || 0, 320);
    var c = charts[id];
    if (!c || c.key !== key) {
      if (c) { c.plot.destroy(); }
      opts.width = width;
      opts.height = 240;
      charts[id] = { key: key, plot: new uPlot(opts, data, el) };
    } else {
      if (c.plot.width !== width) { c.plot.setSize({ width: width, height: 240 }); }
      c.plot.setData(data);
    }
    fig.dataset.series = opts.series.slice(1).map(function (s) { return s.label; }).join(",");
    fig.dataset.points = String(data[0].length);
    fig.classList.toggle("nodata", data[0].length === 0);
  }

  function metricSeries() {
    return [
      { label: "loss", scale: "loss", stroke: COLORS[0], width: 2, points: { show: true } },
      { label: "AUC", scale: "auc", stroke: COLORS[1], width: 2, points: { show: true } }
    ];
  }
  function metricAxes() {
    return [{}, { scale: "loss", label: "loss" }, { scale: "auc", label: "AUC", side: 1, grid: { show: false } }];
  }

  function drawEpochs(st) {
    var xs = [], loss = [], auc = [];
    st.epochs.forEach(function (e) { xs.push(e.epoch); loss.push(e.loss); auc.push(e.auc); });
    draw("chart-epoch", "epoch", {
      scales: { x: { time: false } },
      series: [{ label: "epoch" }].concat(metricSeries()),
      axes: [{ label: "epoch", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }].concat(metricAxes().slice(1))
    }, [xs, loss, auc]);
  }

  function drawTime(st) {
    var xs = [], loss = [], auc = [];
    st.epochs.slice().filter(function (e) { return e.at && e.at.indexOf("0001-") !== 0; })
      .sort(function (a, b) { return Date.parse(a.at) - Date.parse(b.at); })
      .forEach(function (e) { xs.push(Date.parse(e.at) / 1000); loss.push(e.loss); auc.push(e.auc); });
    draw("chart-time", "time", {
      series: [{ label: "time" }].concat(metricSeries()),
      axes: metricAxes()
    }, [xs, loss, auc]);
  }

  function drawSpeed(st) {
    var sp = st.speed || { times: [], workers: [] };
    var series = [{ label: "time" }], data = [sp.times || []];
    (sp.workers || []).forEach(function (w, i) {
      series.push({ label: "worker " + w.rank, stroke: COLORS[i % COLORS.length], width: 1.5,
        value: function (u, v) { return v == null ? "–" : v.toFixed(0) + "/s"; } });
      data.push(w.rates);
    });
    draw("chart-speed", series.map(function (s) { return s.label; }).join(","), {
      series: series,
      axes: [{}, { label: "examples/s", size: 70 }]
    }, data);
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    if (cls) { td.className = cls; }
    tr.appendChild(td);
    return td;
  }

  function drawTasks(st) {
    var body = $("tasks").tBodies[0];
    var rows = document.createDocumentFragment();
    st.tasks.forEach(function (t) {
      var tr = document.createElement("tr");
      tr.className = t.state;
      tr.dataset.task = t.task;
      cell(tr, t.task);
      cell(tr, t.state);
      cell(tr, t.attempt, "num");
      cell(tr, t.restarts, "num");
      cell(tr, t.node);
      cell(tr, t.container);
      var exit = cell(tr, (t.exit || "").split("\n")[0]);
      if (t.exit) { exit.title = t.exit; }
      var td = cell(tr, "");
      if (t.logs_at) {
        ["stdout", "stderr"].forEach(function (s, i) {
          if (i > 0) { td.appendChild(document.createTextNode(" ")); }
          var a = document.createElement("a");
          a.href = t.logs + s;
          a.textContent = s;
          td.appendChild(a);
        });
      }
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);
  }

  // drawEvents lists the exits and recoveries, newest first.
  function drawEvents(st) {
    var body = $("events").tBodies[0];
    var rows = document.createDocumentFragment();
    var names = { "exited": "exited", "back": "running again", "rejoined": "rejoined the synchronous steps", "restored": "restored from the replicas", "scheduler-rebuilt": "replaced the scheduler", "resumed": "resumed from a checkpoint", "job restart": "whole job restarting", "job back": "whole job running again" };
    (st.events || []).slice().reverse().forEach(function (e) {
      var tr = document.createElement("tr");
      tr.className = "event-" + e.kind.replace(" ", "-");
      cell(tr, new Date(e.at).toLocaleTimeString());
      cell(tr, e.task || "job");
      cell(tr, names[e.kind] || e.kind);
      cell(tr, !e.took_s ? "" : e.took_s < 1 ? (e.took_s * 1000).toFixed(0) + " ms" : e.took_s.toFixed(2) + " s", "num");
      cell(tr, e.detail);
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);
    $("no-events").hidden = (st.events || []).length > 0;
  }

  function drawMetrics(st) {
    var body = $("metrics").tBodies[0];
    var rows = document.createDocumentFragment();
    Object.keys(st.metrics || {}).sort().forEach(function (k) {
      var tr = document.createElement("tr");
      cell(tr, k);
      var v = st.metrics[k];
      cell(tr, typeof v === "number" ? String(parseFloat(v.toPrecision(6))) : v, "num");
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);
  }

  function summary(st) {
    var s = $("summary");
    s.replaceChildren();
    var b = document.createElement("b");
    b.textContent = st.state;
    b.className = "state-" + st.state;
    s.appendChild(document.createTextNode("State "));
    s.appendChild(b);
    var parts = ["epoch " + st.epoch + ": " + st.shards_done + " of " + st.shards_total + " shards done"];
    if (st.epochs_planned) {
      parts.push(st.epochs_planned + " epochs planned, " + Math.floor(100 * (st.progress || 0)) + "% done");
    }
    st.roles.forEach(function (r) {
      parts.push(r.role + " " + r.running + " running / " + r.want + (r.restarts ? ", " + r.restarts + " restarts" : ""));
    });
    if (st.failovers) { parts.push("whole job started again " + st.failovers + "×"); }
    if (st.located_shards) {
      parts.push(st.node_local_shards + " of " + st.located_shards + " located shards read node-local");
    }
    if (st.blacklisted_nodes && st.blacklisted_nodes.length) {
      parts.push("blacklisted: " + st.blacklisted_nodes.map(function (n) {
        return n.node + " (" + n.failures + " failures)";
      }).join(", "));
    }
    if (st.started) { parts.push("started " + new Date(st.started).toLocaleString()); }
    s.appendChild(document.createTextNode(" · " + parts.join(" · ")));
    var d = $("diagnostics");
    d.hidden = !st.diagnostics;
    d.textContent = st.diagnostics || "";
  }

  function render(st) {
    document.title = st.name + " – " + st.state;
    $("name").textContent = st.name || "Spindle job";
    summary(st);
    drawEpochs(st);
    drawTime(st);
    drawSpeed(st);
    drawTasks(st);
    drawEvents(st);
    drawMetrics(st);
    document.body.dataset.state = st.state;
    document.body.dataset.drawn = String(++draws);
  }

  function poll() {
    fetch("status.json", { cache: "no-store" }).then(function (r) {
      if (!r.ok) { throw new Error("status.json: " + r.status + " " + r.statusText); }
      return r.json();
    }).then(function (st) {
      $("error").hidden = true;
      render(st);
      document.body.dataset.polls = String(++polls);
      if (st.state === "RUNNING") { setTimeout(poll, POLL_MS); }
    }).catch(function (err) {
      $("error").hidden = false;
      $("error").textContent = "The job's status is not available: " + err.message + " (retrying)";
      setTimeout(poll, POLL_MS);
    });
  }

  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (id) {
      var el = $(id).querySelector(".plot");
      charts[id].plot.setSize({ width: Math.max(el.clientWidth || 0, 320), height: 240 });
    });
  });
  poll();
})();
