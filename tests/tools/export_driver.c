/* A user's program around a model that `minitrain export --format c` wrote, for
 * export_check.py: compiled with -DMODEL=<name> -DMODEL_HEADER="<name>.h" (and -DCLASSIFIER,
 * -DLABELS, -DCLASS_NAMES for the heads), it reads x.bin (float32 rows of MODEL_INPUTS) and
 * writes what predict would: y.bin (the outputs), and for a classifier class.bin (the class,
 * as float32) and p.bin (probabilities), for bce labels.bin (0/1 as float32) and p.bin, and the
 * class names one per line in names.txt. Usage: driver DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include MODEL_HEADER

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define SYM(s) CAT(MODEL, s)

static FILE *open_in(const char *dir, const char *file, const char *mode) {
  char path[4096];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  f = fopen(path, mode);
  if (!f) {
    perror(path);
    exit(1);
  }
  return f;
}

static void write_floats(const char *dir, const char *file, const float *v, long n) {
  FILE *f = open_in(dir, file, "wb");
  if (fwrite(v, sizeof(float), (size_t)n, f) != (size_t)n) exit(1);
  fclose(f);
}

int main(int argc, char **argv) {
  FILE *f;
  long size, rows;
  float *x, *y;
  if (argc != 2) return 2;
  f = open_in(argv[1], "x.bin", "rb");
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, 0, SEEK_SET);
  rows = size / (long)(sizeof(float) * SYM(_INPUTS));
  x = malloc((size_t)size + 1);
  y = malloc(sizeof(float) * (size_t)(rows * SYM(_OUTPUTS)) + 1);
  if (!x || !y || fread(x, 1, (size_t)size, f) != (size_t)size) return 1;
  fclose(f);
  SYM(_forward)(x, y, rows);
  write_floats(argv[1], "y.bin", y, rows * SYM(_OUTPUTS));
#if defined(CLASSIFIER) || defined(LABELS)
  {
    long r, j;
    float *cls = malloc(sizeof(float) * (size_t)(rows * SYM(_OUTPUTS)) + 1);
    float *p = malloc(sizeof(float) * (size_t)(rows * SYM(_OUTPUTS)) + 1);
    for (r = 0; r < rows; ++r) {
      const float *row = x + r * SYM(_INPUTS);
      SYM(_probabilities)(row, p + r * SYM(_OUTPUTS));
#ifdef CLASSIFIER
      cls[r] = (float)SYM(_predict_class)(row);
      (void)j;
#else
      {
        long labels[SYM(_OUTPUTS)];
        SYM(_predict_labels)(row, labels);
        for (j = 0; j < SYM(_OUTPUTS); ++j) cls[r * SYM(_OUTPUTS) + j] = (float)labels[j];
      }
#endif
    }
#ifdef CLASSIFIER
    write_floats(argv[1], "class.bin", cls, rows);
#else
    write_floats(argv[1], "labels.bin", cls, rows * SYM(_OUTPUTS));
#endif
    write_floats(argv[1], "p.bin", p, rows * SYM(_OUTPUTS));
    free(cls);
    free(p);
  }
#endif
#ifdef CLASS_NAMES
  {
    int k;
    f = open_in(argv[1], "names.txt", "wb");
    for (k = 0; k < SYM(_OUTPUTS); ++k) fprintf(f, "%s\n", SYM(_class_names)[k]);
    fclose(f);
  }
#endif
  free(x);
  free(y);
  return 0;
}
