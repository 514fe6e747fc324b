#include <stdint.h>

int spindle_awake_start(int threads, uint64_t window_ns);
void spindle_awake_wake(void);
uint64_t *spindle_awake_activity(void);
uint32_t *spindle_awake_asleep_word(void);
uint64_t spindle_awake_spins(void);
int spindle_awake_sleeping(void);
