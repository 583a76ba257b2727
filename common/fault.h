/*
 * fault — the one fault-injection registry (common/fault.c). Tests make
 * folio fail where real systems fail (device memory, a lost GPU, a worker
 * killed mid-job, an ingest killed between commit and move) through one
 * environment variable with one grammar:
 *
 *     FOLIO_FAULT=SITE[:ARG][,SITE[:ARG]...]
 *
 * SITE is one of the named sites below; the code that hosts a site asks
 * for it by name. The hooks exist only in test builds
 * (-DFOLIO_FAULT_INJECTION=ON): without it every query answers "not
 * injected" and FOLIO_FAULT is never read, so a stray variable in a
 * production environment can never make a worker kill itself. The
 * variable is read at every query (tests set and unset it between calls);
 * a name that is not a site is logged once per process (a typo would
 * otherwise make a fault test pass for the wrong reason).
 *
 * (The sandboxed PDF helper, ingest/pdfhelper, links nothing of folio and
 * keeps its own FOLIO_PDF_FAULT=crash_page:N; sandbox_escape is parsed by
 * common/sandbox, which the helpers link, from the same FOLIO_FAULT.)
 */
#ifndef FOLIO_FAULT_H
#define FOLIO_FAULT_H

#include <stddef.h>

/* The named sites: SITE, what its ARG means, where and what it fails. */
#define FOLIO_FAULT_SITES(X)                                                                 \
    X(vk_oom, "", "engine/vk: every device memory allocation fails (out of device memory)")  \
    X(vk_device_lost, "", "engine/vk: every submit reports VK_ERROR_DEVICE_LOST")             \
    X(pipeline, "SHADER", "engine/vk: creating SHADER's pipeline fails (one site a shader)")  \
    X(device_lost, "N", "engine/vlm: the N-th classify of an instance reports a lost device") \
    X(crash_on_document, "SHA256-PREFIX", "worker: SIGKILL on a job whose document hash starts so") \
    X(sleep_ms, "MS", "worker: each job sleeps MS before it is classified")                   \
    X(slow_results_ms, "MS", "worker: each group of results waits MS before it is written")   \
    X(ingest_crash_after_commit, "N", "ingest: SIGKILL right after the N-th committed batch") \
    X(gpu_page_fail, "H", "engine/tiers: every GPU pass holding a page of height H fails")    \
    X(gpu_nan, "H", "engine/tiers: a page of height H gets NaN label scores from its pass")  \
    X(gpu_gather_ms, "MS", "engine/tiers: the GPU thread waits MS before taking a pass")     \
    X(ocr_crash_width, "N", "engine/ocrhelper: folio-ocr raises SIGSEGV on a page N pixels wide") \
    X(sandbox_escape, "NAME", "folio-pdf, folio-ocr: once confined, try escape NAME (or all); exit 97 if it works")

enum folio_fault_site {
#define FOLIO_FAULT_ENUM(name, arg, what) FOLIO_FAULT_##name,
    FOLIO_FAULT_SITES(FOLIO_FAULT_ENUM)
#undef FOLIO_FAULT_ENUM
    FOLIO_FAULT_NSITES
};

/* 1 when FOLIO_FAULT names site; with arg non-NULL only as SITE:ARG
 * (exactly). Always 0 without FOLIO_FAULT_INJECTION. */
int folio_fault(enum folio_fault_site site, const char *arg);
/* 1 when FOLIO_FAULT names site; its first ARG (maybe "") goes to out. */
int folio_fault_arg(enum folio_fault_site site, char *out, size_t n);
/* The first ARG of site as a number; 0 when the site is absent or its
 * ARG is not a non-negative decimal number. */
long folio_fault_num(enum folio_fault_site site);
/* The name and ARG description of a site ("vk_oom", ""), for messages. */
const char *folio_fault_name(enum folio_fault_site site);
/* 1 when the hooks are compiled in (`folio version` says which). */
int folio_fault_built(void);

#endif
