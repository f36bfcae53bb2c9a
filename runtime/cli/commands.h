/* tlm-run's subcommands. Each takes its own argv (argv[0] is the command
 * name) and returns the exit status: 0 ok, 1 user error, 2 usage. */
#ifndef TLM_COMMANDS_H
#define TLM_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenizer(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_study(int argc, char **argv);

#endif
