/*
 * report.h - the lab's report: report.md and report.html with inline
 * SVG plots, written from a run's results.json and samples.csv alone,
 * so the same files always give the same bytes (tests/lab/ holds a
 * golden copy).
 */
#ifndef SL_LAB_REPORT_H
#define SL_LAB_REPORT_H

/* Writes DIR/report.md and DIR/report.html from DIR/results.json and
 * DIR/samples.csv: 0, or -1 with a message on stderr. */
int lb_report_write(const char *dir);

/* `sluice lab report --out DIR`; argv[0] is "report". */
int lb_report_main(int argc, char **argv);

#endif
