// The console's live updates: every element marked data-live is fetched
// anew from the page's own URL every few seconds and swapped in place, so
// lists, runs and censuses follow the database without a reload. Nothing
// is fetched from anywhere but the console.
(function () {
  "use strict";
  var every = Number(document.body.dataset.refresh) || 0;
  if (every <= 0 || !document.querySelector("[data-live]")) return;
  function refresh() {
    if (document.hidden) return setTimeout(refresh, every);
    fetch(location.href, { credentials: "same-origin", headers: { "X-Docket-Live": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var next = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = el.id && next.getElementById(el.id);
          if (fresh && fresh.outerHTML !== el.outerHTML) el.replaceWith(document.importNode(fresh, true));
        });
        document.body.dataset.refreshed = String(Date.now());
      })
      .catch(function () {})
      .then(function () { setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
