/*
 * run.h - `sluice lab run`: the whole experiment (docs/lab.md).
 */
#ifndef SL_LAB_RUN_H
#define SL_LAB_RUN_H

/* argv[0] is "run"; returns the exit status: 0 every acceptance check
 * passed, 1 a check failed or the run could not be made, 2 usage. */
int lb_run_main(int argc, char **argv);

#endif
