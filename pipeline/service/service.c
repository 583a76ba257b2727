/* sd_notify for Type=notify units (see service.h); libsystemd does the
 * socket protocol. Failures to notify are ignored on purpose: systemd
 * itself reports a service that never becomes ready or stops pinging. */
#include "pipeline/service/service.h"

#include "common/common.h"

#include <stdio.h>
#include <systemd/sd-daemon.h>

void service_ready(const char *status)
{
    sd_notifyf(0, "READY=1\nSTATUS=%s", status ? status : "ready");
}

void service_status(const char *status) { sd_notifyf(0, "STATUS=%s", status); }

void service_stopping(void) { sd_notify(0, "STOPPING=1\nSTATUS=draining"); }

void service_watchdog_init(struct service_watchdog *wd)
{
    uint64_t usec = 0;
    wd->interval_ms = sd_watchdog_enabled(0, &usec) > 0 ? (double)usec / 2000.0 : 0;
    wd->next_ms = 0;
    if (wd->interval_ms > 0)
        folio_log(FOLIO_LOG_INFO, "watchdog", "ping_ms=%.0f", wd->interval_ms);
}

void service_watchdog_tick(struct service_watchdog *wd)
{
    if (wd->interval_ms <= 0)
        return;
    double now = folio_mono_ms();
    if (now < wd->next_ms)
        return;
    sd_notify(0, "WATCHDOG=1");
    wd->next_ms = now + wd->interval_ms;
}

double service_watchdog_max_wait_ms(const struct service_watchdog *wd)
{
    if (wd->interval_ms <= 0)
        return 1e12;
    double left = wd->next_ms - folio_mono_ms();
    return left > 0 ? left : 0;
}
