/* provenance.h: what is needed to reproduce an attempt (issue 10).
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
 * Hashing: a file up to provenance_full_hash_max bytes is hashed whole
 * ("hash": "sha256"); a larger one by its size, mtime and first and last
 * MiB ("hash": "sha256 of size, mtime, first and last MiB (file larger
 * than N bytes)"), so a multi-terabyte data set never stalls the controller.
 * Hashing happens once per attempt, when the attempt is created.
 */
#ifndef DT_PROVENANCE_H
#define DT_PROVENANCE_H

#include <stdint.h>
#include <jansson.h>

struct job;
struct attempt;

/* Files larger than this are hashed by their ends only. */
extern const int64_t provenance_full_hash_max;

/* The provenance of a new attempt (new reference), everything but the
 * machine.  'att' must have its resume fields set.  Never NULL unless out
 * of memory; a file that cannot be read is recorded with its error. */
json_t *provenance_attempt_new (const struct job *job, const struct attempt *att,
                                const char *launcher);

/* Add the machine (agents' hostinfo, node ranks, node list) to the
 * attempt's provenance, when every agent has registered. */
void provenance_set_machine (struct attempt *att);

/* One file's entry: {arg, path, bytes, mtime, sha256, hash} or {arg, path,
 * error} (new reference).  'path' is used as is. */
json_t *provenance_file (const char *arg, const char *path);

#endif
