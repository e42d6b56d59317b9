// Parley in the browser: one WebSocket to the server, the events shown as they come
// (the protocol is in docs/web.md). Nothing is fetched from elsewhere.
import { Conversation } from "./view.js";
import { Timers } from "./timers.js";

const token = new URLSearchParams(location.search).get("token") || "";
const state = document.getElementById("state");
const text = document.getElementById("text");
const stop = document.getElementById("stop");
const confirmBox = document.getElementById("confirm");
const conversation = new Conversation();
const timers = new Timers(document.getElementById("timers"), document.getElementById("ringing"));

const STATES = { idle: "Idle", thinking: "Thinking" };
const CUTS = {
  repetition: "The reply was cut short: it began to repeat itself.",
  "prompt-text": "The reply was cut short: it began to write its instructions.",
  "template-token": "The reply was cut short: it began to write the model's own markup.",
  "tool-call": "The reply was cut short: it began to write a tool call as text.",
};
const ANSWERED = {
  yes: "Yes: running it.", no: "Not done.", unclear: "Not done: that was not a yes.",
  "no-answer": "Not done: no answer came.", stopped: "Not done.",
};

const scheme = location.protocol === "https:" ? "wss:" : "ws:";
const socket = new WebSocket(`${scheme}//${location.host}/ws?token=${encodeURIComponent(token)}`);
socket.addEventListener("message", (received) => show(JSON.parse(received.data)));
socket.addEventListener("close", () => {
  state.textContent = "Disconnected: Parley has stopped (reload the page once it runs again)";
  stop.disabled = true;
});

function send(message) {
  socket.send(JSON.stringify(message));
}

function setState(name) {
  state.textContent = STATES[name] || name;
  stop.disabled = name !== "thinking";
}

function ask(question) {
  document.getElementById("question").textContent = question;
  confirmBox.hidden = false;
}

function show(m) {
  switch (m.type) {
    case "conversation":
      conversation.clear();
      for (const message of m.messages) conversation.message(message);
      conversation.summary(m.summary.text, m.summary.covered_through);
      setState(m.state);
      timers.show(m.timers);
      confirmBox.hidden = true;
      for (const event of m.live) show(event);
      if (m.confirm) ask(m.confirm.question);
      break;
    case "message": conversation.message(m); break;
    case "state": setState(m.state); break;
    case "timers": timers.show(m.timers); break;
    case "text-delta": conversation.delta(m.text); break;
    case "reply-done": conversation.done(m.cancelled); break;
    case "tool-call": conversation.toolCall(m.label); break;
    case "tool-result": conversation.toolResult(m.content); break;
    case "status": conversation.line(m.text); break;
    case "recall-hint":
      conversation.line(`Recalling message #${m.message} from earlier in this conversation`);
      break;
    case "research-budget-reached":
      conversation.line("Research budget reached; answering with what was found.");
      break;
    case "reply-cut": conversation.line(CUTS[m.reason] || "The reply was cut short."); break;
    case "error": conversation.line(m.message, "error"); break;
    case "summary-start": conversation.summaryStarted(); break;
    case "summary": conversation.summary(m.text, m.covered_through); break;
    case "summary-failed":
      conversation.summaryEnded(`Could not summarize the earlier conversation: ${m.reason}. ` +
                                "The oldest messages are left out of the prompt instead.");
      break;
    case "summary-cancelled": conversation.summaryEnded(""); break;
    case "timer-finished": timers.ring(m.text); break;
    case "confirm-asked": ask(m.question); break;
    case "confirm-answered":
      confirmBox.hidden = true;
      conversation.line(ANSWERED[m.outcome] || "Not done.");
      break;
    default: break; // a newer server's message: nothing to show
  }
}

document.getElementById("composer").addEventListener("submit", (submitted) => {
  submitted.preventDefault();
  const said = text.value.trim();
  if (!said) return;
  send({ type: "text", text: said });
  text.value = "";
});
stop.addEventListener("click", () => send({ type: "stop" }));
document.getElementById("yes").addEventListener("click", () => send({ type: "confirm", answer: "yes" }));
document.getElementById("no").addEventListener("click", () => send({ type: "confirm", answer: "no" }));
text.focus();
