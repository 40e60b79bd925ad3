/*
** replay_internal.h -- the switches of src/replay that the tests reach.
*/
#ifndef SQ_REPLAY_INTERNAL_H
#define SQ_REPLAY_INTERNAL_H

/* 1 (the default): grad_step stages the gradients tile by tile where it
** can; 0: always the whole path, worker by worker (the tests' reference). */
extern int sq_replay_tiles;
/* The steps whose gradients were staged tile by tile, for the tests that
** must know the tiled pass ran. */
extern unsigned long sq_replay_tiled_steps;

#endif
