"""The engines. Only this package imports llama_cpp, faster_whisper or piper, lazily."""
