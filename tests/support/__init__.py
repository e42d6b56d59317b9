"""Code the tests share, and the benchmarks may import: the stand-in engines, clocks,
audio clips, the sound server, speech recordings, spoken requests and question sets."""
