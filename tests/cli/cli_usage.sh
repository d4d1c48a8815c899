# cli_usage.sh — the command line itself: --help on every subcommand, `info`, and that unknown commands, unknown
# flags and bad values are errors (exit 2) that say what is accepted.
. "$(dirname "$0")/lib.sh"

sf 0 help --help
has "top-level help lists commands" help.out "train"
has "top-level help documents exit codes" help.out "exit codes"
for cmd in train eval bench plot info export import; do
    sf 0 "help_$cmd" "$cmd" --help
    has "$cmd --help" "help_$cmd.out" "usage: spikefuse $cmd"
done
sf 2 nocmd
sf 2 badcmd fly
has "unknown command names the commands" badcmd.err "commands: train, eval, bench, plot, export, import, info"

sf 0 info info
has "info: version" info.out "spikefuse 0."
has "info: OpenMP threads" info.out "OpenMP threads: 2"
has "info: BLAS" info.out "BLAS:"
has "info: CUDA devices" info.out "CUDA devices:"
sf 2 info_extra info --verbose

sf 2 train_noconfig train
has "train without CONFIG" train_noconfig.err "no CONFIG given"
sf 2 train_badflag train x.ini --epochs 3
has "unknown train flag names the accepted ones" train_badflag.err "accepted: --set, --out, --resume, --device"
sf 2 train_noval train x.ini --out
has "missing value" train_noval.err "--out needs a value"
sf 2 train_twoconfigs train a.ini b.ini
sf 2 train_baddevice train "$HERE/tiny_mlp.ini" --device gpu
has "bad device lists the accepted ones" train_baddevice.err "expected cpu, cuda, cuda:N or auto"
sf 3 train_missing train does-not-exist.ini
has "missing config is named" train_missing.err "does-not-exist.ini"

sf 2 bench_badsteps bench "$HERE/tiny_mlp.ini" --steps many
has "bad --steps says what is accepted" bench_badsteps.err "expected an integer from 1 to"
sf 2 bench_zerosteps bench "$HERE/tiny_mlp.ini" --steps 0
sf 2 bench_badflag bench "$HERE/tiny_mlp.ini" --fast
has "unknown bench flag" bench_badflag.err "accepted: --steps"
sf 2 eval_nock eval
sf 2 eval_badbatch eval x.safetensors --batch -1
sf 1 eval_missing eval missing.safetensors
has "missing checkpoint is named" eval_missing.err "missing.safetensors"

finish
