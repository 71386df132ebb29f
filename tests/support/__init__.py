"""Helpers shared by the tests: scripted judges and runs, a scripted OpenAI-compatible server,
llama.cpp's llama-server, and the real vLLM package."""
