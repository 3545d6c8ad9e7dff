/* stall.c - the loop stall watch (stall.h). */
#include "stall.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <sys/resource.h>

#include "common.h"

static struct tw_stall watch;
static uv_timer_t timer;
static bool started;

static uint64_t sub_u64(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

uint64_t tw_stall_note(struct tw_stall *s, uint64_t now_ms,
		       const struct tw_cpu *cpu, struct tw_cpu *spent)
{
	uint64_t late = 0;

	if (s->last_ms && now_ms > s->last_ms + TW_STALL_PERIOD_MS)
		late = now_ms - s->last_ms - TW_STALL_PERIOD_MS;
	if (s->last_ms && late >= TW_STALL_WARN_MS) {
		spent->user_us = sub_u64(cpu->user_us, s->cpu.user_us);
		spent->sys_us = sub_u64(cpu->sys_us, s->cpu.sys_us);
		spent->waits = sub_u64(cpu->waits, s->cpu.waits);
		spent->preempts = sub_u64(cpu->preempts, s->cpu.preempts);
		s->count++;
		if (late > s->max_ms)
			s->max_ms = late;
	} else {
		late = 0;
	}
	s->last_ms = now_ms;
	s->cpu = *cpu;
	return late;
}

static void thread_cpu(struct tw_cpu *c)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) < 0) {
		*c = (struct tw_cpu){ 0 };
		return;
	}
	c->user_us = (uint64_t)ru.ru_utime.tv_sec * 1000000u +
		     (uint64_t)ru.ru_utime.tv_usec;
	c->sys_us = (uint64_t)ru.ru_stime.tv_sec * 1000000u +
		    (uint64_t)ru.ru_stime.tv_usec;
	c->waits = (uint64_t)ru.ru_nvcsw;
	c->preempts = (uint64_t)ru.ru_nivcsw;
}

static void on_tick(uv_timer_t *t)
{
	struct tw_cpu now, spent;
	uint64_t late;

	(void)t;
	thread_cpu(&now);
	/* The real clock, not uv_now: the loop's time was taken before the
	 * callbacks of this pass ran, and a stall inside one of them is
	 * what we look for. */
	late = tw_stall_note(&watch, tw_now_ms(), &now, &spent);
	if (late)
		tw_log_rl(TW_LOG_WARN, "event loop held for %" PRIu64 " ms "
			  "(a %u ms timer ran %" PRIu64 " ms after the last): "
			  "its thread used %" PRIu64 " ms of user and %" PRIu64
			  " ms of system CPU, blocked %" PRIu64 " times and "
			  "was preempted %" PRIu64 " times meanwhile; every "
			  "request and ping waited", late, TW_STALL_PERIOD_MS,
			  late + TW_STALL_PERIOD_MS, spent.user_us / 1000,
			  spent.sys_us / 1000, spent.waits, spent.preempts);
}

int tw_stall_start(uv_loop_t *loop)
{
	int rc;

	if (started)
		return 0;
	rc = uv_timer_init(loop, &timer);
	if (rc < 0)
		return rc;
	rc = uv_timer_start(&timer, on_tick, TW_STALL_PERIOD_MS,
			    TW_STALL_PERIOD_MS);
	if (rc < 0) {
		uv_close((uv_handle_t *)&timer, NULL);
		return rc;
	}
	uv_unref((uv_handle_t *)&timer);
	started = true;
	return 0;
}

void tw_stall_stop(uv_loop_t *loop)
{
	if (!started || timer.loop != loop)
		return;
	started = false;
	uv_timer_stop(&timer);
	uv_close((uv_handle_t *)&timer, NULL);
}

const struct tw_stall *tw_stall_get(void)
{
	return &watch;
}
