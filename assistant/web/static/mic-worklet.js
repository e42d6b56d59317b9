// The microphone in 30 ms frames of 16-bit samples, for Parley: runs in the audio thread
// of an AudioContext at 16 kHz, and posts each frame (an ArrayBuffer, int16 little-endian
// mono) to the page, which sends it over the WebSocket. 30 ms, as parley voice reads its
// microphone: the end of a turn is heard no later than there (50 ms frames cost up to 20 ms).
const FRAME = 480;

class MicFrames extends AudioWorkletProcessor {
  constructor() {
    super();
    this.frame = new Int16Array(FRAME);
    this.filled = 0;
  }

  process(inputs) {
    const samples = inputs[0] && inputs[0][0];
    if (samples) {
      for (const sample of samples) {
        // Clamped first: an Int16Array wraps what does not fit.
        this.frame[this.filled++] = Math.max(-1, Math.min(1, sample)) * 0x7fff;
        if (this.filled === FRAME) {
          this.port.postMessage(this.frame.buffer, [this.frame.buffer]);
          this.frame = new Int16Array(FRAME);
          this.filled = 0;
        }
      }
    }
    return true;
  }
}

registerProcessor("mic-frames", MicFrames);
