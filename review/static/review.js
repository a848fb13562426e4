// The review pages: keyboard scoring, inline answers from the lineage, live updates (SSE).
"use strict";

const rater = document.getElementById("rater");
if (rater) {
  rater.value = localStorage.getItem("rater") || "";
  rater.addEventListener("change", () => localStorage.setItem("rater", rater.value.trim()));
}

async function send(form) {
  const message = form.querySelector(".message") || form.parentElement.querySelector(".message");
  const data = new FormData(form);
  if (rater && rater.value.trim()) data.set("rater", rater.value.trim());
  message.textContent = "…";
  message.className = "message";
  try {
    const response = await fetch(form.action, { method: "POST", body: data });
    const answer = await response.json();
    message.textContent = answer.ok || answer.error;
    message.className = "message " + (answer.ok ? "ok" : "error");
    if (answer.ok && form.classList.contains("score")) form.reset();
  } catch (err) {
    message.textContent = "Not sent: " + err;
    message.className = "message error";
  }
}

document.querySelectorAll("form.score, form.action").forEach((form) => {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send(form);
  });
  const comment = form.querySelector("textarea");
  if (comment) {
    comment.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {  // Shift+Enter: a new line
        event.preventDefault();
        send(form);
      }
    });
  }
});

// j / k: the next / previous lineage's score field
const scoreInputs = Array.from(document.querySelectorAll(".score-input"));
document.addEventListener("keydown", (event) => {
  const typing = event.target.matches("textarea, input:not(.score-input), select");
  if (typing || !scoreInputs.length || (event.key !== "j" && event.key !== "k")) return;
  event.preventDefault();
  const at = scoreInputs.indexOf(document.activeElement);
  const next = event.key === "j" ? at + 1 : at - 1;
  scoreInputs[(next + scoreInputs.length) % scoreInputs.length].focus();
});
const waiting = document.querySelector(".card .status.awaiting_score");
const firstField = waiting
  ? waiting.closest(".card").querySelector(".score-input")
  : scoreInputs[0];
// focus the score field without scrolling past the output it scores
if (firstField) firstField.focus({ preventScroll: true });

// Live: the server says what changed (a row per lineage); fetch those cards, keep what is typed.
async function refreshCard(body) {
  const response = await fetch(body.dataset.card);
  if (!response.ok) return;
  body.innerHTML = await response.text();
  const header = body.querySelector("header");
  const cycle = body.closest(".card").querySelector("input[name=cycle]");
  if (header && cycle) cycle.value = header.dataset.cycle;
}

async function refreshInbox(table) {
  const response = await fetch(table.dataset.rows);
  if (response.ok) document.getElementById("inbox-rows").innerHTML = await response.text();
}

const live = document.querySelector("[data-live]");
if (live && window.EventSource) {
  let seen = null;  // the first event describes the state the page was rendered from
  const source = new EventSource(live.dataset.live);
  source.addEventListener("change", (event) => {
    const now = JSON.parse(JSON.parse(event.data));
    if (live.classList.contains("inbox")) {
      if (seen !== null) refreshInbox(live);
    } else {
      const rows = new Map(now.map((row) => [row[0], JSON.stringify(row)]));
      if (seen !== null) {
        for (const [lineage, row] of rows) {
          if (seen.get(lineage) === row) continue;
          const body = document.querySelector(`[data-lineage="${CSS.escape(lineage)}"] .card-body`);
          if (body) refreshCard(body);
        }
      }
      seen = rows;
      return;
    }
    seen = now;
  });
}
