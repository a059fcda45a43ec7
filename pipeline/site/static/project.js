/* "Last month's confirmed cases": project an area's own count with the published season ratios.
 *
 * Loaded by the map only when an area panel first opens (a few KB); the form exists only when this
 * script runs, so without JavaScript nothing of it shows. expected = cases x ratio, range = cases x
 * low .. cases x high (the route /v1/transmission/ratios/lgas, one request per state, kept). Months
 * where the service's cross-validation found no gain over carrying the count forward say so and give
 * no number (docs: skill).
 */
(function () {
  "use strict";
  var cache = {}; // state code -> promise of the ratio route's answer
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function lastMonth() {
    var d = new Date();
    d.setUTCDate(1);
    d.setUTCMonth(d.getUTCMonth() - 1);
    return d.toISOString().slice(0, 7);
  }

  function ratios(api, stateCode) {
    if (!cache[stateCode]) {
      cache[stateCode] = api("/v1/transmission/ratios/lgas?state=" + encodeURIComponent(stateCode));
      cache[stateCode].catch(function () { delete cache[stateCode]; });
    }
    return cache[stateCode];
  }

  /** Cases are whole: half up, floor(x + 0.5) (x >= 0): the one rule of this form and the Python and R
   * clients (tests/clients/test_rounding.py compares the three on a grid). */
  function wholeCases(x) { return Math.floor(x + 0.5); }

  /** The projection of `cases` counted in `month` (YYYY-MM) from one LGA's ratio records. A weak season
   * whose evidence says the projection lost carries the count forward (`forecast` "persistence"). */
  function project(records, month, cases) {
    var y = Number(month.slice(0, 4)), m = Number(month.slice(5, 7));
    return records.filter(function (r) { return r.start_month === m; })
      .sort(function (a, b) { return a.horizon - b.horizon; })
      .map(function (r) {
        var persistence = r.forecast === "persistence";
        var ok = (r.beats_persistence === true || persistence) && r.low !== null && r.high !== null;
        var k = m - 1 + r.horizon;
        return {
          horizon: r.horizon, period: (y + Math.floor(k / 12)) + "-" + String(k % 12 + 1).padStart(2, "0"),
          ok: ok, status: ok ? (persistence ? "persistence" : "ok") : "insufficient_skill",
          expected: ok ? wholeCases(cases * r.ratio) : null,
          low: ok ? wholeCases(cases * r.low) : null, high: ok ? wholeCases(cases * r.high) : null,
        };
      });
  }

  function draw(panel, rows) {
    var table = panel.querySelector("tbody");
    table.textContent = "";
    rows.forEach(function (p) {
      var tr = el("tr");
      [p.period, p.ok ? p.expected : "insufficient skill", p.ok ? p.low + " – " + p.high : "–"].forEach(function (v) {
        tr.appendChild(el("td", {}, String(v)));
      });
      tr.dataset.horizon = p.horizon;
      table.appendChild(tr);
    });
    var canvas = panel.querySelector("canvas");
    var old = window.Chart && window.Chart.getChart(canvas);
    if (old) old.destroy();
    var shown = rows.some(function (p) { return p.ok; });
    panel.querySelector(".project-chart").hidden = !shown;
    if (!shown || !window.Chart) return;
    var labels = rows.map(function (p) { return MONTHS[Number(p.period.slice(5, 7)) - 1] + " " + p.period.slice(0, 4); });
    new window.Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: [
        { label: "80 % range", data: rows.map(function (p) { return p.high; }), borderWidth: 0, pointRadius: 0,
          backgroundColor: "rgba(240,59,32,0.18)", fill: "+1" },
        { label: "80 % range, low", data: rows.map(function (p) { return p.low; }), borderWidth: 0, pointRadius: 0 },
        { label: "expected cases", data: rows.map(function (p) { return p.expected; }), borderColor: "#bd0026",
          backgroundColor: "#bd0026" },
      ] },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
        plugins: { legend: { labels: { filter: function (i) { return i.text !== "80 % range, low"; } } } },
        scales: { y: { beginAtZero: true, title: { display: true, text: "confirmed cases" } } } },
    });
  }

  function build(panel) {
    panel.textContent = "";
    panel.appendChild(el("h2", {}, "Project your own count"));
    var form = el("form", { id: "project-form", novalidate: "" });
    var id = "project-cases";
    form.appendChild(el("label", { for: id }, "Last month's confirmed cases"));
    form.appendChild(el("input", { id: id, type: "number", min: "0", step: "1", inputmode: "numeric", required: "" }));
    form.appendChild(el("label", { for: "project-month" }, "Month of the count"));
    form.appendChild(el("input", { id: "project-month", type: "month", value: lastMonth(), required: "" }));
    form.appendChild(el("button", { type: "submit" }, "Project"));
    panel.appendChild(form);
    panel.appendChild(el("p", { class: "status", role: "status", id: "project-status" }));
    var fig = el("div", { class: "chart-box project-chart", hidden: "" });
    fig.appendChild(el("canvas", { id: "project-chart", role: "img",
      "aria-label": "Expected confirmed cases in the next four months with their 80 % range; the same figures are in the table" }));
    panel.appendChild(fig);
    var t = el("table", { id: "project-table" });
    var head = el("tr");
    ["Month", "Expected cases", "80 % range"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    t.appendChild(el("thead")).appendChild(head);
    t.appendChild(el("tbody"));
    panel.appendChild(t);
    panel.appendChild(el("p", {}, "")).appendChild(el("small", {},
      "Your count × the season's expected change (published ratios, checked against later counts in " +
      "cross-validation). “Insufficient skill”: there, carrying your count forward did as well."));
    return form;
  }

  /** Show the form for one LGA. opts: {lga, state, name, api(path) -> promise of JSON, explain(err)}. */
  function show(panel, opts) {
    var form = panel.querySelector("#project-form") || build(panel);
    panel.hidden = false;
    panel.dataset.lga = opts.lga;
    panel.querySelector("tbody").textContent = "";
    panel.querySelector(".project-chart").hidden = true;
    panel.querySelector("h2").textContent = "Project your own count: " + opts.name;
    form.onsubmit = function (ev) {
      ev.preventDefault();
      var status = panel.querySelector("#project-status");
      var cases = Number(form.querySelector("#project-cases").value), month = form.querySelector("#project-month").value;
      if (form.querySelector("#project-cases").value === "" || !isFinite(cases) || cases < 0 || !/^\d{4}-\d{2}$/.test(month)) {
        status.textContent = "Enter a count of 0 or more and the month it was counted in.";
        return;
      }
      status.textContent = "";
      ratios(opts.api, opts.state).then(function (doc) {
        if (panel.dataset.lga !== opts.lga) return;
        var mine = doc.lgas.filter(function (r) { return r.lga_code === opts.lga; });
        if (!mine.length) { status.textContent = "No season ratios for this LGA in this release."; return; }
        draw(panel, project(mine, month, cases));
        panel.dataset.drawn = opts.lga + "@" + month + "@" + cases;
      }).catch(function (err) { status.textContent = opts.explain ? opts.explain(err) : String(err); });
    };
  }

  window.MalariaProject = { show: show, project: project, wholeCases: wholeCases };
})();
