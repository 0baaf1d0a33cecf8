/* provenance.h: what is needed to reproduce an attempt.
 *
 * Each attempt carries a JSON object in attempts.provenance (shown per
 * attempt by GET /v1/jobs/{id} and copied into every checkpoint manifest
 * the attempt commits):
 *
 *   dtctl_version, source_revision, version   the controller's build
 *   spec, spec_sha256                          the job spec as stored
 *   command, workdir
 *   trainer {arg, path, bytes, mtime, sha256, hash}   command[0] resolved via
 *                                              the job's PATH / workdir
 *   script  {...}                              the script of an interpreter
 *                                              (sh, python, ...) if a file
 *   files   [{arg, path, bytes, mtime, sha256, hash}]  the other arguments
 *                                              (or --opt=VALUE parts) that
 *                                              name regular files
 *   env                                        what the job's spec sets
 *   env_set_by_agent                           what dtagent adds for every
 *                                              rank (per-rank values named)
 *   resumed_from {step, manifest_sha256, dir} or null
 *   machine {launcher, slurm_version, slurm_job_id, nodelist,
 *            nodes [{node, node_rank, spare, addr, cpu_model, cores,
 *                    mem_mb, gpus, ...hostinfo}]}   (set when the attempt
 *                                              turns running)
 *
 *   hashing {state, as_uid, bytes_read, budget_bytes}   "pending" until
 *                                              the worker is done, then
 *                                              "done" (or "refused", error)
 *
 * Hashing: the files named in the user's command are the user's, so they
 * are resolved, opened and read by a worker thread with that user's file
 * system identity (userfs.h), never by root and never in the event loop:
 * the open is O_NONBLOCK|O_NOFOLLOW (on the resolved path) and only a
 * regular file is read (a FIFO, device or unreadable file is recorded
 * with its error, never waited on).  A file up to provenance_full_hash_max
 * bytes is hashed whole ("hash": "sha256"); a larger one by its size,
 * mtime and first and last MiB ("hash": "sha256 of size, mtime, first and
 * last MiB (file larger than N bytes)"); an attempt reads at most
 * provenance_budget_bytes in all, and the files past it are recorded as
 * not hashed.  The event loop picks the result up (provenance_tick) into
 * the attempt's provenance, stored with its next state change.
 */
#ifndef DT_PROVENANCE_H
#define DT_PROVENANCE_H

#include <stdint.h>
#include <jansson.h>

struct job;
struct jobs;
struct attempt;

/* Files larger than this are hashed by their ends only. */
extern const int64_t provenance_full_hash_max;
/* What one attempt's hashing may read in all. */
extern const int64_t provenance_budget_bytes;

/* The provenance of a new attempt (new reference), everything but the
 * machine.  'att' must have its resume fields set.  Never NULL unless out
 * of memory; a file that cannot be read is recorded with its error. */
json_t *provenance_attempt_new (const struct job *job, const struct attempt *att,
                                const char *launcher);

/* Add the machine (agents' hostinfo, node ranks, node list) to the
 * attempt's provenance, when every agent has registered. */
void provenance_set_machine (struct attempt *att);

/* One file's entry: {arg, path, bytes, mtime, sha256, hash} or {arg, path,
 * error} (new reference), with the calling thread's identity (the worker
 * has taken the job user's): O_NONBLOCK|O_NOFOLLOW on the resolved path, a
 * regular file only.  'path' is used as is. */
json_t *provenance_file (const char *arg, const char *path);

/* Pick up the hashing the worker finished (call from the event loop). */
void provenance_tick (struct jobs *jobs);

/* Stop the worker thread and drop what it has not done (at exit). */
void provenance_shutdown (void);

#endif
