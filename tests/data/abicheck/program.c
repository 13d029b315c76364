/* An executable a wheel ships (vLLM's vllm-rs is one): it is run, not loaded, so only the
   platform tag's rules apply to it. */
int main(void) { return 0; }
