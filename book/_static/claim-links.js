// A link to a claim (#claim-...) opens the folds that hold its row, scrolls to it and highlights it, so that
// the claims page and the results table land on the row with its reason. Plain DOM code, for offline reading.
function openClaim() {
  const id = decodeURIComponent(location.hash.slice(1));
  if (!id.startsWith("claim-")) return;
  const target = document.getElementById(id);
  if (!target) return;
  for (let node = target.parentElement; node; node = node.parentElement) {
    if (node.tagName === "DETAILS") node.open = true;
  }
  for (const row of document.querySelectorAll("tr.claim-target")) row.classList.remove("claim-target");
  const row = target.closest("tr") || target;
  row.classList.add("claim-target");
  row.scrollIntoView({block: "center"});
}
document.addEventListener("DOMContentLoaded", openClaim);
window.addEventListener("hashchange", openClaim);
