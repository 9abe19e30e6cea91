/* Aurora Weather API demo site script (original, no dependencies).
   - remembers a light/dark theme choice
   - renders the sample forecast from /data/forecast.json into #forecast-widget
   - reads display defaults from /data/config.json */
(function () {
  "use strict";

  var root = document.documentElement;
  var stored = null;
  try { stored = localStorage.getItem("aurora-theme"); } catch (e) { /* storage may be blocked */ }
  if (stored) root.setAttribute("data-theme", stored);

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-theme-toggle]");
    if (!toggle) return;
    var next = root.getAttribute("data-theme") === "dark" ? "light" : "dark";
    root.setAttribute("data-theme", next);
    try { localStorage.setItem("aurora-theme", next); } catch (e) { /* ignore */ }
  });

  function getJSON(url) {
    return fetch(url, { headers: { Accept: "application/json" } }).then(function (res) {
      if (!res.ok) throw new Error(url + " answered " + res.status);
      return res.json();
    });
  }

  function formatHour(iso, locale) {
    var d = new Date(iso);
    return d.toLocaleTimeString(locale, { hour: "2-digit", minute: "2-digit", timeZone: "UTC" }) + " UTC";
  }

  function render(widget, config, forecast) {
    var unit = config.units === "imperial" ? "°F" : "°C";
    var rows = forecast.hourly.slice(0, config.widget.hours).map(function (h) {
      var temp = config.units === "imperial" ? h.temperature * 9 / 5 + 32 : h.temperature;
      return "<tr><td>" + formatHour(h.time, config.locale) + "</td><td>" + temp.toFixed(1) + " " + unit +
        "</td><td>" + h.condition + "</td><td>" + Math.round(h.confidence * 100) + "%</td></tr>";
    });
    widget.innerHTML =
      "<p><strong>" + forecast.location.name + "</strong> (" + forecast.location.lat + ", " + forecast.location.lon + ")</p>" +
      "<table><thead><tr><th>Time</th><th>Temp</th><th>Condition</th><th>Confidence</th></tr></thead><tbody>" +
      rows.join("") + "</tbody></table>";
  }

  document.addEventListener("DOMContentLoaded", function () {
    var widget = document.getElementById("forecast-widget");
    if (!widget) return;
    widget.textContent = "Loading sample forecast…";
    Promise.all([getJSON("/data/config.json"), getJSON(widget.getAttribute("data-source") || "/data/forecast.json")])
      .then(function (results) { render(widget, results[0], results[1]); })
      .catch(function (err) {
        widget.textContent = "The sample forecast could not be loaded (" + err.message + ").";
      });
  });
})();
