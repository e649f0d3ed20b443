// The console works without JavaScript; this only adds the copy button of a new key and the back links.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy]");
  if (button) {
    const text = document.getElementById(button.dataset.copy).textContent.trim();
    navigator.clipboard.writeText(text).then(() => { button.textContent = "Copied"; },
      () => { button.textContent = "Select and copy"; });
  }
  const back = event.target.closest("[data-back]");
  if (back) { event.preventDefault(); history.back(); }
});
