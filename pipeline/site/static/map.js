/* The risk map: LGA choropleth by month, details, seasonality and survey charts.
 *
 * Reads the API with the key the reader pastes (kept in sessionStorage, sent only in the
 * Authorization header). First paint: the downloads index, the national LGA outlines, the
 * LGA-by-month risk table and the gazetteer — four requests; every month is in the table, so
 * moving the slider asks nothing more. Seasonality and survey figures are
 * fetched once, on the first LGA chosen. The browser's HTTP cache revalidates with ETags.
 */
(function () {
  "use strict";

  var KEY_STORE = "malaria-risk.api-key";
  var config = JSON.parse(document.getElementById("map-config").textContent);
  var LEVELS = config.levels; // [{level, label, colour, lower, upper}]
  var COLOUR = {};
  LEVELS.forEach(function (l) { COLOUR[l.level] = l.colour; });
  var NO_DATA = "#d9dee7";
  var MONTH_NAMES = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  var $ = function (id) { return document.getElementById(id); };
  var state = {
    key: null, files: null, periods: [], kinds: {}, horizon: {}, provisional: {},
    risk: {}, // period -> lga_code -> row
    gazetteer: {}, // lga_code -> row
    layers: {}, // lga_code -> Leaflet layer
    lgaLayer: null, map: null, period: null, stateFilter: "", selected: null,
    transmission: null, stateTransmission: null, charts: {},
  };

  // --- small helpers -------------------------------------------------------------------

  function status(text, isError) {
    var el = $("map-status");
    el.textContent = text;
    el.className = isError ? "status error" : "status";
  }

  /** RFC 4180 CSV (quoted fields, doubled quotes) into a list of objects keyed by the header. */
  function parseCsv(text) {
    var rows = [], row = [], field = "", i = 0, q = false, n = text.length;
    while (i < n) {
      var c = text[i];
      if (q) {
        if (c === '"') {
          if (text[i + 1] === '"') { field += '"'; i += 2; continue; }
          q = false; i++; continue;
        }
        field += c; i++; continue;
      }
      if (c === '"') { q = true; i++; continue; }
      if (c === ",") { row.push(field); field = ""; i++; continue; }
      if (c === "\r") { i++; continue; }
      if (c === "\n") { row.push(field); rows.push(row); row = []; field = ""; i++; continue; }
      field += c; i++;
    }
    if (field !== "" || row.length) { row.push(field); rows.push(row); }
    var header = rows.shift() || [];
    return rows.map(function (r) {
      var o = {};
      for (var j = 0; j < header.length; j++) o[header[j]] = r[j] === undefined ? "" : r[j];
      return o;
    });
  }

  function ApiError(status, body, retryAfter) {
    this.status = status; this.body = body; this.retryAfter = retryAfter;
  }

  function explain(err) {
    if (err instanceof ApiError) {
      var b = err.body || {};
      var text = "The API answered " + err.status + (b.code ? " " + b.code : "") + (b.detail ? ": " + b.detail : ".");
      if (err.status === 401) text += " Check the key you pasted (keys start with svc_live_ or svc_test_).";
      if (err.retryAfter) text += " Try again in " + err.retryAfter + " s.";
      return text;
    }
    return "Could not reach the API: " + (err && err.message ? err.message : err);
  }

  /** GET with the key in the Authorization header; the browser cache revalidates with ETags. */
  function api(path, as) {
    return fetch(path, { headers: { "Authorization": "Bearer " + state.key }, cache: "no-cache" })
      .then(function (r) {
        if (!r.ok) {
          return r.json().catch(function () { return null; }).then(function (body) {
            throw new ApiError(r.status, body, r.headers.get("Retry-After"));
          });
        }
        return as === "text" ? r.text() : r.json();
      });
  }

  function fileUrl(name) {
    var f = (state.files || []).find(function (x) { return x.name === name; });
    if (!f) throw new Error("this release has no download named " + name);
    return f.path;
  }

  function fmtShare(v) { return v === "" || v === null || v === undefined ? "no figure" : v; }
  function fmtInt(v) { return v === "" || v === null || v === undefined ? "no figure" : Number(v).toLocaleString("en"); }
  function levelLabel(level) {
    var l = LEVELS.find(function (x) { return x.level === level; });
    return l ? l.label : (level || "no figure");
  }
  function isForecast(period) { return state.kinds[period] === "forecast"; }
  function monthText(period) {
    if (isForecast(period)) {
      var h = state.horizon[period];
      return period + " · forecast" + (h ? ", " + h + (h === "1" ? " month" : " months") + " ahead" : "");
    }
    return period + " · estimated" + (state.provisional[period] ? " (rainfall adjustment from provisional CHIRPS rainfall)" : "");
  }

  // --- key -----------------------------------------------------------------------------

  function setupKey() {
    var input = $("api-key");
    $("key-form").addEventListener("submit", function (ev) {
      ev.preventDefault(); // never a form submission: the key must not reach a URL
      var key = input.value.trim();
      if (!/^svc_(live|test)_[A-Za-z0-9_-]{32}$/.test(key)) {
        status("That is not an API key: keys start with svc_live_ or svc_test_ followed by 32 characters.", true);
        return;
      }
      sessionStorage.setItem(KEY_STORE, key);
      input.value = "";
      start(key);
    });
    $("forget-key").addEventListener("click", function () {
      sessionStorage.removeItem(KEY_STORE);
      state.key = null;
      $("key-state").textContent = "No key in this tab.";
      status("Key forgotten. Paste a key to load the map.");
    });
    var kept = sessionStorage.getItem(KEY_STORE);
    if (kept) start(kept);
    else status("Paste an API key to load the map. The key stays in this browser tab only.");
  }

  // --- loading ---------------------------------------------------------------------------

  function start(key) {
    state.key = key;
    $("key-state").textContent = "Using key …" + key.slice(-4) + " (kept in this tab only).";
    status("Loading outlines and the risk table …");
    api("/v1/downloads").then(function (index) {
      state.files = index.files;
      $("release-id").textContent = index.release_id + " · model " + index.model_version;
      return Promise.all([
        api(fileUrl("lga_outlines.geojson")),
        api(fileUrl("risk_lga_month.csv"), "text"),
        api(fileUrl("gazetteer.csv"), "text"),
      ]);
    }).then(function (res) {
      loadGazetteer(parseCsv(res[2]));
      loadRisk(parseCsv(res[1]));
      drawMap(res[0]);
      setupControls();
      status("");
      document.body.classList.add("map-ready");
    }).catch(function (err) {
      status(explain(err), true);
      if (err instanceof ApiError && err.status === 401) sessionStorage.removeItem(KEY_STORE);
    });
  }

  function loadGazetteer(rows) {
    rows.forEach(function (r) { state.gazetteer[r.lga_code] = r; });
  }

  function loadRisk(rows) {
    var seen = {};
    rows.forEach(function (r) {
      var p = r.period;
      if (!state.risk[p]) state.risk[p] = {};
      state.risk[p][r.lga_code] = r;
      if (!seen[p]) {
        seen[p] = true;
        state.kinds[p] = r.kind === "forecast" ? "forecast" : "estimated";
        state.horizon[p] = r.horizon;
      }
      if (r.provisional === "true") state.provisional[p] = true; // a column the table may carry
    });
    state.periods = Object.keys(seen).sort();
  }

  // --- the map ---------------------------------------------------------------------------

  function styleFor(code) {
    var row = state.risk[state.period] && state.risk[state.period][code];
    var hidden = state.stateFilter && state.gazetteer[code] && state.gazetteer[code].state_code !== state.stateFilter;
    return {
      fillColor: hidden ? NO_DATA : row && COLOUR[row.level] ? COLOUR[row.level] : NO_DATA,
      fillOpacity: hidden ? 0.5 : 0.9,
      color: code === state.selected ? "#000000" : "#ffffff",
      weight: code === state.selected ? 2.5 : 0.6,
      opacity: hidden ? 0.3 : 1,
    };
  }

  function drawMap(outlines) {
    state.map = L.map("map", {
      attributionControl: false, zoomSnap: 0.25, minZoom: 5, maxZoom: 11,
      preferCanvas: false, keyboard: true,
    });
    L.control.attribution({ prefix: false })
      .addAttribution('Outlines: eHealth Africa / GRID3, OCHA · <a href="/docs/attribution.html">sources</a>')
      .addTo(state.map);
    state.lgaLayer = L.geoJSON(outlines, {
      // the class names each LGA's shape (lga-<code>) for tests and user styles
      style: function (f) {
        return Object.assign({ className: "lga lga-" + f.properties.lga_code }, styleFor(f.properties.lga_code));
      },
      onEachFeature: function (f, layer) {
        var code = f.properties.lga_code;
        state.layers[code] = layer;
        layer.on("click", function () { selectLga(code); });
        layer.on("mouseover", function () { hover(code); });
        layer.on("mouseout", function () { hover(null); });
      },
    }).addTo(state.map);
    var paths = document.querySelectorAll("#map path.leaflet-interactive");
    paths.forEach(function (p) { p.setAttribute("aria-hidden", "true"); });
    state.map.fitBounds(state.lgaLayer.getBounds());
    $("map").setAttribute("aria-label", "Map of " + Object.keys(state.layers).length +
      " LGAs coloured by risk level. Use the LGA list below the map to choose one with the keyboard.");
  }

  function recolour() {
    Object.keys(state.layers).forEach(function (code) { state.layers[code].setStyle(styleFor(code)); });
  }

  function hover(code) {
    var el = $("hover");
    if (!code) { el.textContent = ""; return; }
    var g = state.gazetteer[code] || {}, r = (state.risk[state.period] || {})[code];
    el.textContent = (g.lga || code) + ", " + (g.state || "") + ": " +
      (r ? levelLabel(r.level) + " (score " + r.score + ")" : "no figure");
  }

  // --- controls --------------------------------------------------------------------------

  function setupControls() {
    var slider = $("month");
    slider.min = 0; slider.max = state.periods.length - 1;
    var firstForecast = state.periods.findIndex(isForecast);
    // opens on the latest estimated month, as the API's default period
    var last = firstForecast > 0 ? firstForecast - 1 : state.periods.length - 1;
    slider.value = last;
    slider.disabled = false;
    if (firstForecast >= 0) {
      var share = 100 * firstForecast / Math.max(1, state.periods.length - 1);
      $("forecast-band").style.left = share + "%";
      $("forecast-band").hidden = false;
    }
    $("slider-ends").textContent = state.periods[0] + " … " + state.periods[state.periods.length - 1] +
      (firstForecast >= 0 ? "; forecast months from " + state.periods[firstForecast] + " (shaded)" : "");
    slider.addEventListener("input", function () { setPeriod(state.periods[Number(slider.value)]); });
    setPeriod(state.periods[last]);

    var select = $("state-filter");
    var states = {};
    Object.keys(state.gazetteer).forEach(function (c) { states[state.gazetteer[c].state_code] = state.gazetteer[c].state; });
    Object.keys(states).sort(function (a, b) { return states[a].localeCompare(states[b]); }).forEach(function (c) {
      var o = document.createElement("option");
      o.value = c; o.textContent = states[c] + " (" + c + ")";
      select.appendChild(o);
    });
    select.disabled = false;
    select.addEventListener("change", function () { setState(select.value); });
    $("lga-select").addEventListener("change", function () { if (this.value) selectLga(this.value); });
    fillLgaSelect();
  }

  function setPeriod(period) {
    state.period = period;
    var label = $("month-label");
    label.textContent = monthText(period);
    label.className = isForecast(period) ? "forecast" : "";
    $("month").setAttribute("aria-valuetext", monthText(period));
    recolour();
    if (state.selected) showDetails(state.selected);
    renderTable();
  }

  function setState(code) {
    state.stateFilter = code;
    recolour();
    var layers = Object.keys(state.layers).filter(function (c) {
      return !code || (state.gazetteer[c] && state.gazetteer[c].state_code === code);
    }).map(function (c) { return state.layers[c]; });
    if (layers.length) state.map.fitBounds(L.featureGroup(layers).getBounds(), { padding: [10, 10] });
    fillLgaSelect();
    renderTable();
    if (code) loadStateCharts(code);
  }

  function lgasInView() {
    return Object.keys(state.gazetteer).filter(function (c) {
      return !state.stateFilter || state.gazetteer[c].state_code === state.stateFilter;
    }).sort(function (a, b) {
      var ga = state.gazetteer[a], gb = state.gazetteer[b];
      return (ga.state + ga.lga).localeCompare(gb.state + gb.lga);
    });
  }

  function fillLgaSelect() {
    var sel = $("lga-select");
    sel.textContent = "";
    var first = document.createElement("option");
    first.value = ""; first.textContent = "Choose an LGA …";
    sel.appendChild(first);
    lgasInView().forEach(function (c) {
      var g = state.gazetteer[c], o = document.createElement("option");
      o.value = c; o.textContent = g.lga + (state.stateFilter ? "" : ", " + g.state);
      if (c === state.selected) o.selected = true;
      sel.appendChild(o);
    });
    sel.disabled = false;
  }

  // --- details and the map's table view ---------------------------------------------------

  function selectLga(code) {
    var previous = state.selected;
    state.selected = code;
    if (previous && state.layers[previous]) state.layers[previous].setStyle(styleFor(previous));
    if (state.layers[code]) { state.layers[code].setStyle(styleFor(code)); state.layers[code].bringToFront(); }
    if ($("lga-select").value !== code) $("lga-select").value = code;
    showDetails(code);
    loadCharts(code);
  }

  function showDetails(code) {
    var g = state.gazetteer[code] || {}, r = (state.risk[state.period] || {})[code];
    var box = $("details");
    box.hidden = false;
    $("d-name").textContent = (g.lga || code) + ", " + (g.state || "");
    var fields = {
      lga_code: code, period: monthText(state.period),
      score: r ? r.score : "no figure",
      range: r ? r.score_low + " – " + r.score_high : "no figure",
      level: r ? levelLabel(r.level) : "no figure",
      population: fmtInt(g.population),
      is_urban: g.is_urban === "true" ? "urban" : g.is_urban === "false" ? "not urban" : "no figure",
    };
    Object.keys(fields).forEach(function (k) {
      var el = box.querySelector('[data-field="' + k + '"]');
      if (el) el.textContent = fields[k];
    });
    box.querySelector('[data-field="score"]').dataset.value = r ? r.score : "";
    box.querySelector('[data-field="range"]').dataset.low = r ? r.score_low : "";
    box.querySelector('[data-field="range"]').dataset.high = r ? r.score_high : "";
    box.querySelector('[data-field="level"]').dataset.value = r ? r.level : "";
    box.querySelector('[data-field="population"]').dataset.value = g.population || "";
    box.querySelector('[data-field="is_urban"]').dataset.value = g.is_urban || "";
  }

  function renderTable() {
    var details = $("map-table");
    if (!details.open) return; // built when opened: 774 rows are not needed for the map itself
    var tbody = details.querySelector("tbody");
    tbody.textContent = "";
    $("map-table-caption").textContent = "Risk by LGA, " + monthText(state.period) +
      (state.stateFilter ? ", " + $("state-filter").selectedOptions[0].textContent : ", all states");
    var frag = document.createDocumentFragment();
    lgasInView().forEach(function (c) {
      var g = state.gazetteer[c], r = (state.risk[state.period] || {})[c];
      var tr = document.createElement("tr");
      [g.lga, g.state, c, r ? r.score : "", r ? r.score_low + " – " + r.score_high : "", r ? levelLabel(r.level) : ""]
        .forEach(function (v) { var td = document.createElement("td"); td.textContent = v; tr.appendChild(td); });
      frag.appendChild(tr);
    });
    tbody.appendChild(frag);
  }

  // --- charts ----------------------------------------------------------------------------

  function loadTransmission() {
    if (!state.transmission) {
      state.transmission = Promise.all([
        api(fileUrl("transmission_lga_month.csv"), "text").then(parseCsv),
        api("/v1/transmission/states"),
      ]).then(function (res) {
        var byLga = {};
        res[0].forEach(function (r) { (byLga[r.lga_code] = byLga[r.lga_code] || []).push(r); });
        var byState = {};
        res[1].states.forEach(function (s) { byState[s.state_code] = s; });
        return { lga: byLga, state: byState, national: res[1].national };
      });
      state.transmission.catch(function () { state.transmission = null; });
    }
    return state.transmission;
  }

  function loadCharts(code) {
    var g = state.gazetteer[code] || {};
    $("charts").hidden = false;
    loadTransmission().then(function (t) {
      drawSeason(code, g, t);
      drawSurvey(g.state_code, t);
    }).catch(function (err) { $("charts-status").textContent = explain(err); });
  }

  function loadStateCharts(stateCode) {
    $("charts").hidden = false;
    loadTransmission().then(function (t) { drawSurvey(stateCode, t); })
      .catch(function (err) { $("charts-status").textContent = explain(err); });
  }

  function fillTable(id, header, rows) {
    var table = $(id);
    table.querySelector("thead").innerHTML = "";
    var tr = document.createElement("tr");
    header.forEach(function (h) { var th = document.createElement("th"); th.textContent = h; tr.appendChild(th); });
    table.querySelector("thead").appendChild(tr);
    var tbody = table.querySelector("tbody");
    tbody.textContent = "";
    rows.forEach(function (r) {
      var row = document.createElement("tr");
      r.forEach(function (v) { var td = document.createElement("td"); td.textContent = v === null ? "no figure" : v; row.appendChild(td); });
      tbody.appendChild(row);
    });
  }

  /** Shades the high-season months behind the bars (a plugin local to these charts). */
  var highSeasonShade = {
    id: "highSeasonShade",
    beforeDatasetsDraw: function (chart, args, opts) {
      var high = opts.months || [], x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      if (!high.length) return;
      var step = x.width / 12;
      ctx.save();
      ctx.fillStyle = "rgba(240, 200, 60, 0.22)";
      high.forEach(function (m) { ctx.fillRect(x.getPixelForValue(m - 1) - step / 2, area.top, step, area.bottom - area.top); });
      ctx.restore();
    },
  };

  function chart(id, cfg) {
    if (state.charts[id]) state.charts[id].destroy();
    cfg.options = Object.assign({ animation: false, responsive: true, maintainAspectRatio: false }, cfg.options || {});
    state.charts[id] = new Chart($(id), cfg);
  }

  function drawSeason(code, g, t) {
    var rows = (t.lga[code] || []).slice().sort(function (a, b) { return Number(a.month) - Number(b.month); });
    var st = t.state[g.state_code];
    var stateIndex = st ? st.season.seasonal_index : [];
    var high = rows.filter(function (r) { return r.high_season === "true"; }).map(function (r) { return Number(r.month); });
    $("season-title").textContent = "Seasonality: " + (g.lga || code) + " and " + (g.state || "its state");
    $("season-note").textContent = rows.length
      ? "High season of " + (g.lga || code) + " shaded: " + (high.length ? high.map(function (m) { return MONTH_NAMES[m - 1]; }).join(", ") : "none") + "."
      : "This release has no seasonality figures for this LGA.";
    chart("season-chart", {
      data: {
        labels: MONTH_NAMES,
        datasets: [
          { type: "bar", label: "Seasonal index, " + (g.lga || code), data: rows.map(function (r) { return Number(r.seasonal_index); }),
            backgroundColor: "#3b6ea5", yAxisID: "y" },
          { type: "line", label: "Seasonal index, " + (g.state || "state"), data: stateIndex,
            borderColor: "#1d2330", borderDash: [5, 3], pointRadius: 2, yAxisID: "y" },
          { type: "line", label: "Typical rainfall (mm), " + (g.lga || code), data: rows.map(function (r) { return Number(r.typical_rainfall_mm); }),
            borderColor: "#2a9d8f", backgroundColor: "#2a9d8f", pointRadius: 2, yAxisID: "rain" },
        ],
      },
      options: {
        scales: {
          y: { min: 0, max: 1, title: { display: true, text: "share of peak month" } },
          rain: { position: "right", min: 0, grid: { drawOnChartArea: false }, title: { display: true, text: "rainfall, mm" } },
        },
        plugins: { highSeasonShade: { months: high } },
      },
      plugins: [highSeasonShade],
    });
    fillTable("season-table", ["Month", "Seasonal index (LGA)", "Seasonal index (state)", "Typical rainfall, mm (LGA)", "High season (LGA)"],
      rows.map(function (r, i) {
        return [MONTH_NAMES[Number(r.month) - 1], r.seasonal_index, stateIndex[i] === undefined ? null : stateIndex[i],
          r.typical_rainfall_mm, r.high_season === "true" ? "yes" : "no"];
      }));
  }

  function drawSurvey(stateCode, t) {
    var st = t.state[stateCode];
    var trend = st ? st.survey_trend.slice().sort(function (a, b) { return a.survey_year - b.survey_year; }) : [];
    $("survey-title").textContent = "Survey positivity, " + (st ? st.state : stateCode);
    var ranged = trend.filter(function (e) { return e.low !== null && e.high !== null; }).length;
    $("survey-note").textContent = !trend.length ? "No survey figures for this state."
      : "Share of children aged 6–59 months who tested positive" + (ranged
        ? "; bars show the 95% range where the source gives one."
        : ". The source gives no 95% range for these rounds.");
    var labels = trend.map(function (e) { return e.survey + " (" + e.test + ")"; });
    chart("survey-chart", {
      data: {
        labels: labels,
        datasets: [
          { type: "bar", label: "95% range", data: trend.map(function (e) { return e.low === null || e.high === null ? null : [e.low, e.high]; }),
            backgroundColor: "rgba(59, 110, 165, 0.35)", barPercentage: 0.3 },
          { type: "line", label: "Positivity", data: trend.map(function (e) { return e.positivity; }),
            borderColor: "#b8420f", backgroundColor: "#b8420f", pointRadius: 4 },
        ],
      },
      options: { scales: { y: { min: 0, suggestedMax: 0.7, title: { display: true, text: "share positive" } } } },
    });
    fillTable("survey-table", ["Survey", "Test", "Positivity", "Low (95%)", "High (95%)", "Children tested"],
      trend.map(function (e) {
        return [e.survey, e.test + (e.test_assumed ? " (assumed)" : ""), e.positivity, e.low, e.high, e.children_tested];
      }));
  }

  // --- go --------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", function () {
    $("map-table").addEventListener("toggle", renderTable);
    setupKey();
  });
})();
