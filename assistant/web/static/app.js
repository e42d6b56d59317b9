// Parley in the browser: one WebSocket to the server, the events shown as they come
// (the protocol is in docs/web.md). Nothing is fetched from elsewhere.
import { Conversation } from "./view.js";
import { Timers } from "./timers.js";
import { Voice, microphoneUnavailable } from "./voice.js";

const token = new URLSearchParams(location.search).get("token") || "";
const state = document.getElementById("state");
const text = document.getElementById("text");
const stop = document.getElementById("stop");
const confirmBox = document.getElementById("confirm");
const handsFree = document.getElementById("hands-free");
const talk = document.getElementById("talk");
const voiceNote = document.getElementById("voice-note");
const conversation = new Conversation();
const timers = new Timers(document.getElementById("timers"), document.getElementById("ringing"));

const STATES = { idle: "Idle", listening: "Listening", thinking: "Thinking", speaking: "Speaking" };
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
socket.binaryType = "arraybuffer";
const voice = new Voice((frame) => {
  if (socket.readyState === WebSocket.OPEN) socket.send(frame);
});
socket.addEventListener("message", (received) => {
  if (received.data instanceof ArrayBuffer) voice.play(received.data); // the reply's audio
  else show(JSON.parse(received.data));
});
socket.addEventListener("close", (closed) => {
  // 1009: Parley refused a message over its bound (a paste of more than 1 MiB); it runs on.
  const tooLarge = closed.code === 1009;
  state.textContent = tooLarge
    ? `Disconnected: that message was too large for Parley (${closed.reason}). ` +
      "Reload the page and send less."
    : "Disconnected: Parley has stopped (reload the page once it runs again)";
  stop.disabled = true;
  voiceOff(tooLarge ? "Disconnected: reload the page."
    : "Disconnected: reload the page once Parley runs again.");
  voice.stop();
});

function send(message) {
  if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
}

function setState(name) {
  state.textContent = STATES[name] || name;
  stop.disabled = name !== "thinking" && name !== "speaking";
}

// The voice controls off, saying why in words next to them; typed chat goes on.
function voiceOff(reason) {
  voiceNote.textContent = reason;
  voiceNote.hidden = false;
  for (const control of [handsFree, talk]) {
    control.disabled = true;
    control.title = reason;
  }
  handsFree.setAttribute("aria-checked", "false");
  talk.classList.remove("held");
  voice.listening = false;
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
      if (m.voice === false) voiceOff(`Voice is off: ${m.voice_off}. Typed chat works.`);
      timers.show(m.timers);
      confirmBox.hidden = true;
      for (const event of m.live) show(event);
      if (m.confirm) ask(m.confirm.question);
      break;
    case "message": conversation.message(m); break;
    case "state": setState(m.state); break;
    case "timers": timers.show(m.timers); break;
    case "text-delta": conversation.delta(m.text); break;
    case "heard-partial": conversation.hearing(`${m.text} ${m.tentative}`.trim()); break;
    case "heard": conversation.heard(m.text); break;
    case "audio-stop": voice.stop(); break;
    case "interrupted": conversation.line("Stopped speaking."); break;
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
  voice.wake(); // a press: the reply's voice may play from now
  send({ type: "text", text: said });
  text.value = "";
});
stop.addEventListener("click", () => {
  voice.stop(); // silent at once, before the server hears of it
  send({ type: "stop" });
});
document.getElementById("yes").addEventListener("click", () => send({ type: "confirm", answer: "yes" }));
document.getElementById("no").addEventListener("click", () => send({ type: "confirm", answer: "no" }));
// -- the microphone -------------------------------------------------------------------

const unavailable = microphoneUnavailable();
if (unavailable) voiceOff(unavailable);
let handsFreeOn = false;
let held = false; // Push to talk (or the space bar) is held

function listen() {
  voice.listening = handsFreeOn || held;
}

handsFree.addEventListener("click", async () => {
  const on = handsFree.getAttribute("aria-checked") !== "true";
  if (on) {
    try {
      await voice.start();
    } catch (failed) {
      voiceOff(failed.message);
      return;
    }
  }
  handsFreeOn = on;
  handsFree.setAttribute("aria-checked", String(on));
  listen();
  send({ type: "hands-free", on });
});

async function press() {
  if (held || talk.disabled) return;
  held = true;
  talk.classList.add("held");
  try {
    await voice.start();
  } catch (failed) {
    held = false;
    voiceOff(failed.message);
    return;
  }
  if (!held) return; // released while the microphone started: nothing was said
  send({ type: "talk", pressed: true });
  listen();
}

function release() {
  if (!held) return;
  held = false;
  talk.classList.remove("held");
  // The last frames go out first (the worklet posts every 30 ms), then the release.
  setTimeout(() => {
    listen();
    send({ type: "talk", pressed: false });
  }, 60);
}

talk.addEventListener("pointerdown", (pressed) => {
  pressed.preventDefault();
  press();
});
for (const kind of ["pointerup", "pointerleave", "pointercancel"]) {
  talk.addEventListener(kind, release);
}
// The space bar talks too, unless the text box has it.
document.addEventListener("keydown", (key) => {
  if (key.code !== "Space" || key.target === text) return;
  key.preventDefault();
  if (!key.repeat) press();
});
document.addEventListener("keyup", (key) => {
  if (key.code !== "Space" || key.target === text) return;
  key.preventDefault();
  release();
});

text.focus();
