/* Fake "ad tracker" for the packager demo. It makes no network requests.
   The demo is configured to BLOCK this URL (/ads/tracker.js); if it ever runs,
   it fills the sponsor slot on the home page so the difference is visible. */
(function () {
  window.__auroraAdTrackerLoaded = true;
  var slot = document.getElementById("sponsor-slot");
  if (slot) {
    slot.classList.add("filled");
    slot.innerHTML = "<p><strong>AD:</strong> this box is filled by /ads/tracker.js — it should not appear in a bundle with ad blocking enabled.</p>";
  }
})();
