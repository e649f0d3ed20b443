// The console works without JavaScript; this only adds the copy button of a new key, the back links and the print button.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy]");
  if (button) {
    const text = document.getElementById(button.dataset.copy).textContent.trim();
    navigator.clipboard.writeText(text).then(() => { button.textContent = "Copied"; },
      () => { button.textContent = "Select and copy"; });
  }
  if (event.target.closest("[data-print]")) window.print();
  const back = event.target.closest("[data-back]");
  if (back) { event.preventDefault(); history.back(); }
});
