// The review pages: keyboard scoring, inline answers from the lineage, live updates (SSE).
"use strict";

// The rater's name: asked once, remembered in this browser, sent with every score and action
// (the server refuses one without a name rather than record it under a made-up one)
const rater = document.getElementById("rater");
const raterName = () => (rater ? rater.value.trim() : "");
function rememberRater() {
  if (!rater) return;
  if (raterName()) localStorage.setItem("rater", raterName());
  rater.classList.toggle("missing", !raterName());
}
if (rater) {
  rater.value = localStorage.getItem("rater") || rater.value;  // else the name given at sign-in
  rater.addEventListener("input", rememberRater);
  rememberRater();
}

async function send(form) {
  const message = form.querySelector(".message") || form.parentElement.querySelector(".message");
  const data = new FormData(form);
  if (rater && !raterName()) {
    message.textContent = "Type your name first (“Your name”, at the top): every score is " +
      "recorded under it. It is asked once and remembered.";
    message.className = "message error";
    rater.focus();
    return;
  }
  if (rater) data.set("rater", raterName());
  // a correction sends the wishes its chips hold, in their order
  form.querySelectorAll(".chip").forEach((chip) => data.append("want", chip.dataset.want));
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
// focus the score field without scrolling past the output it scores; the name first, once
if (rater && !raterName() && scoreInputs.length) {
  rater.focus({ preventScroll: true });
  // Enter or Tab from the name: on to the score field
  rater.addEventListener("keydown", (event) => {
    if ((event.key === "Enter" || event.key === "Tab") && raterName() && firstField) {
      event.preventDefault();
      firstField.focus({ preventScroll: true });
    }
  });
} else if (firstField) firstField.focus({ preventScroll: true });

// Live: the server says what changed (a row per lineage); fetch those cards, keep what is typed.
async function refreshCard(body) {
  const response = await fetch(body.dataset.card);
  if (!response.ok) return;
  // a correction being edited (and the focus in it) survives the refresh: the rater's chips
  // are theirs until sent
  const form = body.querySelector("form.correct");
  const focused = form && form.contains(document.activeElement) ? document.activeElement : null;
  const editing = form && (focused || form.classList.contains("edited")) ? form : null;
  body.innerHTML = await response.text();
  const fresh = body.querySelector("form.correct");
  if (editing && fresh) {
    fresh.replaceWith(editing);
    if (focused) focused.focus();
  }
  const header = body.querySelector("header");
  // the score form names the output the card now shows (a re-run replaces it)
  const card = body.closest(".card");
  const cycle = card.querySelector("input[name=cycle]");
  if (header && cycle) cycle.value = header.dataset.cycle;
  const output = card.querySelector("input[name=output_id]");
  if (header && output) output.value = header.dataset.output;
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

// Correcting a reading: each chip is a wish as it was read (Enter or a click removes it); the
// picker adds the one meant ("less" + "formal", "shorter" + "half"). The card body is replaced
// when the lineage changes, so the listeners sit on the document.
function chipFor(want) {
  const chip = document.createElement("button");
  chip.type = "button";
  chip.className = "chip";
  chip.dataset.want = want;
  chip.setAttribute("aria-label", "remove " + want);
  chip.textContent = want + " ×";  // text, never markup
  return chip;
}

function addWant(form) {
  const action = form.querySelector(".pick-action").value;
  const family = form.querySelector(".pick-family").value;
  const amount = form.querySelector(".pick-amount").value.trim().toLowerCase();
  const want = (action === "add" ? "" : action + ":") + family + (amount ? ":" + amount : "");
  form.querySelector(".chips").appendChild(chipFor(want));
  form.querySelector(".pick-amount").value = "";
}

document.addEventListener("click", (event) => {
  const form = event.target.closest("form.correct");
  if (!form) return;
  form.classList.add("edited");
  const chip = event.target.closest(".chip");
  if (chip) {
    const next = chip.nextElementSibling || form.querySelector(".pick-action");
    chip.remove();
    next.focus();
  } else if (event.target.closest(".add-want")) {
    addWant(form);
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && event.target.matches("form.correct .pick-amount")) {
    event.preventDefault();  // Enter in the amount adds the wish; the button sends them
    addWant(event.target.closest("form.correct"));
  }
  const form = event.target.closest && event.target.closest("form.correct");
  if (form) form.classList.add("edited");
});
document.addEventListener("submit", async (event) => {
  if (!event.target.matches("form.correct")) return;
  event.preventDefault();
  await send(event.target);
  event.target.classList.remove("edited");  // sent: the next refresh shows the new reading
});
