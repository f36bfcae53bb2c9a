" Vim syntax file
" Language:   tlm (model descriptions for tapered language models)
" Filenames:  *.tlm
" The name lists below must cover `tlmc --print-keywords`; the editor tests
" (tests/editors) fail when one is missing.

if exists('b:current_syntax')
  finish
endif
let s:cpo_save = &cpo
set cpo&vim

" Declarations. Each keyword hands over to the name it declares (nextgroup),
" so names are highlighted by position, not by a list.
syn keyword tlmInclude   use      nextgroup=tlmModule skipwhite
syn keyword tlmKeyword   param    nextgroup=tlmParamName skipwhite skipempty
syn keyword tlmKeyword   schedule nextgroup=tlmScheduleName skipwhite skipempty
syn keyword tlmKeyword   model    nextgroup=tlmModelName skipwhite skipempty
syn keyword tlmKeyword   train    nextgroup=tlmTrainBody skipwhite skipempty
syn keyword tlmKeyword   study    nextgroup=tlmStudyName skipwhite skipempty
" `in` separates a grid axis from its values: ratio in [1.25, 1.5].
syn keyword tlmKeyword   in

syn match   tlmModule        /\h\w*\%(\.\h\w*\)*/ contained
syn match   tlmParamName     /\h\w*/ contained
syn match   tlmScheduleName  /\h\w*/ contained nextgroup=tlmParams skipwhite
" Parameters, with default values: schedule sigmoid(a, b, k = 10).
syn region  tlmParams        matchgroup=tlmParen start=/(/ end=/)/ contained contains=tlmParam,tlmGroup,@tlmExpr
syn match   tlmParam         /\h\w*\ze\s*\%([,)]\|=\%(=\)\@!\)/ contained
syn region  tlmGroup         start=/(/ end=/)/ contained transparent contains=tlmGroup,@tlmExpr
syn match   tlmModelName     /\h\w*/ contained nextgroup=tlmInherit,tlmModelBody skipwhite skipempty
syn match   tlmInherit       /:/ contained nextgroup=tlmParentName skipwhite skipempty
syn match   tlmParentName    /\h\w*/ contained nextgroup=tlmModelBody skipwhite skipempty
syn match   tlmStudyName     /\h\w*/ contained nextgroup=tlmStudyBody skipwhite skipempty

" Model and train bodies are regions, so that a setting is only highlighted
" where it belongs: `steps` is a train setting, not a model one.
syn region  tlmModelBody matchgroup=tlmBrace start=/{/ end=/}/ contained fold
      \ contains=@tlmExpr,tlmSetting,tlmKeyword
syn region  tlmTrainBody matchgroup=tlmBrace start=/{/ end=/}/ contained fold
      \ contains=@tlmExpr,tlmTrainSetting
syn region  tlmStudyBody matchgroup=tlmBrace start=/{/ end=/}/ contained fold
      \ contains=@tlmExpr,tlmStudySetting,tlmKeyword

" Settings: highlighted where they are assigned (NAME = ..., not NAME == ...).
syn match   tlmSetting      contained /\<\%(vocab\|context\|d_model\|layers\|heads\|head_dim\|mixer\|mlp\|d_ff\|quantum\|budget\|tie_embeddings\|norm_eps\|rope_base\|monotone\|gate\|chunk\|inner_lr\|cms\|tokenizer\)\>\ze\s*=\%(=\)\@!/
syn match   tlmStudySetting contained /\<\%(base\|variants\|baseline\|seeds\|data\|val\|eval\|choices\|cloze\)\>\ze\s*=\%(=\)\@!/
syn match   tlmTrainSetting contained /\<\%(batch\|context\|steps\|optimizer\|lr_schedule\|seed\|grad_clip\|accumulate\|eval_every\|eval_batches\|ckpt_every\|log_every\)\>\ze\s*=\%(=\)\@!/

" Names the compiler knows. A standard schedule is defined last so that it
" wins where lists overlap (cosine, linear, sigmoid).
syn keyword tlmMixer    attention gated_attention titans hope_attention
syn keyword tlmMlp      swiglu gelu
syn keyword tlmValue    true false none elementwise headwise
syn keyword tlmVariable l L t
syn keyword tlmConstant pi
syn keyword tlmFunction uniform adamw sgd constant
syn keyword tlmBuiltin  abs ceil clamp cos exp floor log max mean min pow round sigmoid sin sqrt tanh
syn keyword tlmSchedule linear cosine sigmoid thirds openelm valley normalize

" Numbers: 1_000, 3e-4, 1.5, .5, 2.5e+3 (an _ only between digits, as tlmc
" has it: 1__0 and 1_ are not numbers). Floats are defined after integers so
" that `1.5` is one float, not an integer and a stray `.5`.
syn match   tlmNumber /\%(\w\|\.\)\@<!\d\+\%(_\d\+\)*\>/
syn match   tlmFloat  /\<\d\+\%(_\d\+\)*\.\d\+\%(_\d\+\)*\%([eE][-+]\=\d\+\%(_\d\+\)*\)\=\>/
syn match   tlmFloat  /\<\d\+\%(_\d\+\)*[eE][-+]\=\d\+\%(_\d\+\)*\>/
syn match   tlmFloat  /\%(\w\|\.\)\@<!\.\d\+\%(_\d\+\)*\%([eE][-+]\=\d\+\%(_\d\+\)*\)\=\>/

syn match   tlmOperator /[-+*%?:!<>=]\|&&\|||\|\//

" Strings stay on one line; comments come last so that `//` beats `/`.
" The escapes are \n \t \r \\ \"; tlmc rejects any other (\0 too).
syn match   tlmEscapeError /\\./ contained
syn match   tlmEscape   /\\[ntr\\"]/ contained
syn region  tlmString   start=/"/ skip=/\\\\\|\\"/ end=/"/ end=/$/ oneline contains=tlmEscape,tlmEscapeError,@Spell
syn keyword tlmTodo     contained TODO FIXME XXX NOTE
syn region  tlmComment      start=+//+ end=+$+ contains=tlmTodo,@Spell
syn region  tlmBlockComment start=+/\*+ end=+\*/+ contains=tlmTodo,@Spell fold

syn cluster tlmExpr contains=tlmMixer,tlmMlp,tlmValue,tlmVariable,tlmConstant,tlmFunction,tlmBuiltin,tlmSchedule,tlmNumber,tlmFloat,tlmOperator,tlmString,tlmComment,tlmBlockComment

syn sync fromstart

hi def link tlmInclude      Include
hi def link tlmKeyword      Keyword
hi def link tlmModule       Identifier
hi def link tlmParamName    Identifier
hi def link tlmScheduleName Function
hi def link tlmParam        Identifier
hi def link tlmModelName    Type
hi def link tlmParentName   Type
hi def link tlmInherit      Operator
hi def link tlmSetting      Identifier
hi def link tlmTrainSetting Identifier
hi def link tlmStudySetting Identifier
hi def link tlmStudyName    Type
hi def link tlmMixer        Constant
hi def link tlmMlp          Constant
hi def link tlmValue        Constant
hi def link tlmVariable     Special
hi def link tlmConstant     Constant
hi def link tlmFunction     Function
hi def link tlmBuiltin      Function
hi def link tlmSchedule     Function
hi def link tlmNumber       Number
hi def link tlmFloat        Float
hi def link tlmOperator     Operator
hi def link tlmString       String
hi def link tlmEscape       SpecialChar
hi def link tlmEscapeError  Error
hi def link tlmTodo         Todo
hi def link tlmComment      Comment
hi def link tlmBlockComment Comment

let b:current_syntax = 'tlm'
let &cpo = s:cpo_save
unlet s:cpo_save
