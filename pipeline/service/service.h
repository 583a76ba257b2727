/*
 * Private to pipeline/: the systemd service protocol (sd_notify) for
 * `folio worker` and `folio ingest` under Type=notify units. Outside
 * systemd ($NOTIFY_SOCKET unset) every call is a no-op.
 *
 *   READY=1     after start-up: for a worker, once the engine paths are
 *               pre-warmed and self-tested and the OCR threads run
 *   STATUS=...  a line `systemctl status` shows
 *   STOPPING=1  when a signal starts the drain
 *   WATCHDOG=1  from the main loop, every half WatchdogSec: a loop that
 *               hangs stops pinging and systemd restarts the service
 */
#ifndef FOLIO_PIPELINE_SERVICE_H
#define FOLIO_PIPELINE_SERVICE_H

struct service_watchdog {
    double interval_ms; /* half of WATCHDOG_USEC; 0 = watchdog off */
    double next_ms;     /* monotonic time of the next ping */
};

void service_ready(const char *status);
void service_status(const char *status);
void service_stopping(void);
void service_watchdog_init(struct service_watchdog *wd);
/* Pings when due; call from the main loop. */
void service_watchdog_tick(struct service_watchdog *wd);
/* Longest a loop may sleep and still ping in time (a large number when off). */
double service_watchdog_max_wait_ms(const struct service_watchdog *wd);

#endif
